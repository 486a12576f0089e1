"""Naming one partition of one topic (and an offset in it), as confluent-kafka's clients do.

``TopicPartition(topic, partition=-1, offset=OFFSET_INVALID)`` has confluent-kafka's fields and
constructor: it names a partition in ``assign()``, ``seek()``, ``commit(offsets=...)``,
``committed()`` and ``position()``, and carries the offset those read or set. Equality, hashing
and ordering use ``(topic, partition)`` only (as confluent-kafka's do), so a partition keys
dicts and sets whatever offset it carries.

The logical offsets are confluent-kafka's numbers: ``OFFSET_BEGINNING`` (-2), ``OFFSET_END``
(-1), ``OFFSET_STORED`` (-1000, the group's committed offset) and ``OFFSET_INVALID`` (-1001, none).
"""

from __future__ import annotations

from functools import total_ordering
from typing import NamedTuple

from headwater.types import PartitionId

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001


@total_ordering
class TopicPartition:
    """A partition of a topic, with an offset (``OFFSET_INVALID`` when none was given) and an
    ``error`` (``None``, or the exception a per-partition answer carried)."""

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = PartitionId(partition)
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: BaseException | None = None

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self.topic == other.topic and self.partition == other.partition

    def __lt__(self, other: TopicPartition) -> bool:
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},leader_epoch={self.leader_epoch},error={self.error!r}}}"
        )

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionKey(NamedTuple):
    """A partition of a topic as the coordinator keeps it: a plain tuple, cheap to build and
    hash by the thousand in a rebalance (equal to ``(topic, partition)``)."""

    topic: str
    partition: PartitionId

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
