"""Replica placement for new partitions: pure, deterministic, balanced, rack-aware.

Each partition is placed by three greedy choices over the active brokers, each counted over the
whole cluster (``Load``) so new topics fill the brokers that hold least:

1. the **leader** (first replica): fewest preferred leaderships, then fewest replicas, then the
   broker nearest after a cursor that moves one broker per partition (equal brokers take turns);
2. the **followers**, one at a time: a broker on a rack this partition does not use yet while one
   is available, then fewest replicas, then *most* leaderships (a broker that leads little keeps
   room to lead the next partition without standing out in replicas), then the broker nearest
   after the leader.

What that guarantees (tests/unit/cluster/test_placement.py, by hypothesis): every partition has
``replication_factor`` distinct active brokers; its replicas span ``min(rf, racks)`` racks; from
an empty rack-unaware cluster, both preferred leaders and replicas per broker differ by at most
one. Racks are used only when every active broker has one (as Kafka: a partly racked cluster is
placed rack-unaware); with unevenly sized racks, spread across racks wins over balance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from headwater.errors import InvalidPartitionsError, InvalidReplicationFactorError
from headwater.types import BrokerId
from headwater_broker.cluster.image import MetadataImage


@dataclass(frozen=True)
class Candidate:
    broker_id: BrokerId
    rack: str | None


@dataclass
class Load:
    """Replicas and preferred leaderships per broker, updated as partitions are placed."""

    replicas: dict[BrokerId, int] = field(default_factory=dict)
    leaders: dict[BrokerId, int] = field(default_factory=dict)

    @classmethod
    def of(cls, image: MetadataImage) -> Load:
        load = cls()
        for p in image.all_partitions():
            load.add(p.target_replicas)
        return load

    def add(self, replicas: Sequence[BrokerId]) -> None:
        for b in replicas:
            self.replicas[b] = self.replicas.get(b, 0) + 1
        if replicas:
            self.leaders[replicas[0]] = self.leaders.get(replicas[0], 0) + 1


def default_replication_factor(active_brokers: int) -> int:
    return min(3, active_brokers)


def check_replication_factor(replication_factor: int | None, active_brokers: int) -> int:
    """The factor to use (None or -1: the default), or a refusal that names both numbers."""
    if replication_factor is None or replication_factor == -1:
        if active_brokers == 0:
            raise InvalidReplicationFactorError(
                "No active brokers to place replicas on: 0 brokers are active"
            )
        return default_replication_factor(active_brokers)
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"Replication factor must be at least 1, got {replication_factor}"
        )
    if replication_factor > active_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor {replication_factor} is larger than the number of active "
            f"brokers, {active_brokers}"
        )
    return replication_factor


def place(
    brokers: Sequence[Candidate],
    partitions: int,
    replication_factor: int,
    load: Load | None = None,
    start: int = 0,
) -> list[tuple[BrokerId, ...]]:
    """Replica lists (preferred leader first) for ``partitions`` new partitions.

    ``load`` (the cluster's current load) is updated in place; ``start`` offsets the tie cursor.
    """
    if partitions < 0:
        raise InvalidPartitionsError(f"Cannot place {partitions} partitions")
    ordered = sorted(brokers, key=lambda c: c.broker_id)
    check_replication_factor(replication_factor, len(ordered))
    load = load if load is not None else Load()
    rack_aware = bool(ordered) and all(c.rack is not None for c in ordered)
    position = {c.broker_id: i for i, c in enumerate(ordered)}
    n = len(ordered)
    placed: list[tuple[BrokerId, ...]] = []
    for p in range(partitions):
        cursor = (start + p) % n

        def turn(c: Candidate, cursor: int = cursor) -> int:
            return (position[c.broker_id] - cursor) % n

        def replicas(c: Candidate) -> int:
            return load.replicas.get(c.broker_id, 0)

        def leaders(c: Candidate) -> int:
            return load.leaders.get(c.broker_id, 0)

        leader = min(ordered, key=lambda c: (leaders(c), replicas(c), turn(c)))

        def after_leader(c: Candidate, first: int = position[leader.broker_id]) -> int:
            return (position[c.broker_id] - first) % n

        chosen = [leader]
        racks = {leader.rack}
        while len(chosen) < replication_factor:
            left = [c for c in ordered if c not in chosen]
            if rack_aware:
                new_rack = [c for c in left if c.rack not in racks]
                left = new_rack or left
            follower = min(left, key=lambda c: (replicas(c), -leaders(c), after_leader(c)))
            chosen.append(follower)
            racks.add(follower.rack)
        assignment = tuple(c.broker_id for c in chosen)
        load.add(assignment)
        placed.append(assignment)
    return placed


def candidates(image: MetadataImage) -> list[Candidate]:
    """The brokers new replicas may go to: the active ones."""
    return [Candidate(b.broker_id, b.rack) for b in image.active_brokers()]


def rack_count(brokers: Sequence[Candidate]) -> int:
    return len({c.rack for c in brokers})


def loads(placed: Sequence[Sequence[BrokerId]]) -> Mapping[BrokerId, int]:
    """Replicas per broker in a placement (for callers reporting balance)."""
    counts: dict[BrokerId, int] = {}
    for replicas in placed:
        for b in replicas:
            counts[b] = counts.get(b, 0) + 1
    return counts
