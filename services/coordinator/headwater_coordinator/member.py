"""A consumer group's member as the coordinator keeps it, and its stored JSON.

One :class:`Member` per member id: its subscription, epochs, session deadlines and the
partitions it owns (``assigned`` plus ``revoking``) and is headed for (``target``); the partition
sets are decoded from storage lazily (a heartbeat touches few members of a large group). The
state machine over the members is ``group.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from headwater.topic_partition import PartitionKey
from headwater.types import MemberEpoch

JOIN_EPOCH = MemberEpoch(0)
LEAVE_EPOCH = MemberEpoch(-1)
STATIC_LEAVE_EPOCH = MemberEpoch(-2)


def encode_partitions(tps: Iterable[PartitionKey]) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}`` with sorted keys and partitions (the stored/wire shape)."""
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        out.setdefault(topic, []).append(int(partition))
    return out


def decode_partitions(raw: Mapping[str, Iterable[int]]) -> set[PartitionKey]:
    """The inverse of :func:`encode_partitions`."""
    # tuple.__new__ skips NamedTuple's Python-level __new__ (and PartitionId, the identity at run
    # time): a rebalance decodes every member's partitions, and this keeps that as cheap as it
    # was with plain tuples (calling PartitionKey costs more than twice as much).
    new = tuple.__new__
    return {new(PartitionKey, (topic, p)) for topic, ps in raw.items() for p in ps}


class Member:
    """One member as the group sees it.

    A group is loaded from Redis for every heartbeat, but a heartbeat usually needs only its own
    member's partitions: the others' three partition sets are decoded on first use.
    """

    def __init__(
        self,
        *,
        member_id: str,
        instance_id: str | None,
        epoch: MemberEpoch,
        previous_epoch: MemberEpoch,
        topics: frozenset[str],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        joined_ms: int,
        last_heartbeat_ms: int,
        assigned: set[PartitionKey] | None = None,
        revoking: set[PartitionKey] | None = None,
        target: set[PartitionKey] | None = None,
        revoke_deadline_ms: int = 0,
        left_static: bool = False,
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.epoch = epoch
        self.previous_epoch = previous_epoch
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.joined_ms = joined_ms
        self.last_heartbeat_ms = last_heartbeat_ms
        self.revoke_deadline_ms = revoke_deadline_ms
        self.left_static = left_static
        self._assigned = set(assigned or ())
        self._revoking = set(revoking or ())
        self._target = set(target or ())
        self._undecoded: Mapping[str, Any] | None = None

    def _decode(self) -> None:
        raw, self._undecoded = self._undecoded, None
        if raw is not None:
            self._assigned = decode_partitions(raw["assigned"])
            self._revoking = decode_partitions(raw["revoking"])
            self._target = decode_partitions(raw["target"])

    @property
    def assigned(self) -> set[PartitionKey]:
        """Partitions the member has been told it owns."""
        self._decode()
        return self._assigned

    @assigned.setter
    def assigned(self, value: set[PartitionKey]) -> None:
        self._decode()
        self._assigned = value

    @property
    def revoking(self) -> set[PartitionKey]:
        """Partitions taken from the member that it has not yet confirmed releasing."""
        self._decode()
        return self._revoking

    @revoking.setter
    def revoking(self, value: set[PartitionKey]) -> None:
        self._decode()
        self._revoking = value

    @property
    def target(self) -> set[PartitionKey]:
        """What the assignor wants the member to own."""
        self._decode()
        return self._target

    @target.setter
    def target(self, value: set[PartitionKey]) -> None:
        self._decode()
        self._target = value

    @property
    def owned(self) -> set[PartitionKey]:
        """Partitions the group counts as this member's until it releases them."""
        return self.assigned | self.revoking

    @property
    def session_deadline_ms(self) -> int:
        return self.last_heartbeat_ms + self.session_timeout_ms

    @property
    def deadline_ms(self) -> int:
        """When the member is expired if nothing happens first (session, or slow revocation).

        ``revoke_deadline_ms`` is non-zero exactly while the member has partitions to revoke.
        """
        if self.revoke_deadline_ms:
            return min(self.session_deadline_ms, self.revoke_deadline_ms)
        return self.session_deadline_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "epoch": self.epoch,
            "previous_epoch": self.previous_epoch,
            "topics": sorted(self.topics),
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "joined_ms": self.joined_ms,
            "last_heartbeat_ms": self.last_heartbeat_ms,
            "assigned": encode_partitions(self.assigned),
            "revoking": encode_partitions(self.revoking),
            "target": encode_partitions(self.target),
            "revoke_deadline_ms": self.revoke_deadline_ms,
            "left_static": self.left_static,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Member:
        member = cls(
            member_id=raw["member_id"],
            instance_id=raw["instance_id"],
            epoch=MemberEpoch(raw["epoch"]),
            previous_epoch=MemberEpoch(raw["previous_epoch"]),
            topics=frozenset(raw["topics"]),
            session_timeout_ms=raw["session_timeout_ms"],
            rebalance_timeout_ms=raw["rebalance_timeout_ms"],
            joined_ms=raw["joined_ms"],
            last_heartbeat_ms=raw["last_heartbeat_ms"],
            revoke_deadline_ms=raw["revoke_deadline_ms"],
            left_static=raw["left_static"],
        )
        member._undecoded = raw
        return member
