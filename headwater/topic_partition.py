"""Naming one partition of one topic, as clients and the coordinator refer to it."""

from __future__ import annotations

from typing import NamedTuple

from headwater.types import PartitionId


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable and ordered, so it keys dicts and sorts stably."""

    topic: str
    partition: PartitionId

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
