"""Server-side partition assignors: pure functions from members and topic sizes to a target.

An assignor sees each member's subscription and its previous target, and the partition count of
every subscribed topic; it returns the *target* assignment (which partitions each member should
end up owning). It never decides *when* a partition moves -- the group state machine
(``headwater_coordinator.group``) hands a partition to its new owner only after the old owner has
released it.

- ``uniform``: balanced (counts differ by at most one among members that could take each other's
  partitions) and sticky -- a member keeps every previous partition it still may own unless
  balance needs it elsewhere, so a join or leave moves as few partitions as possible.
- ``range``: Kafka's range assignor -- per topic, subscribers sorted by id get contiguous ranges,
  the first ``count % members`` one partition more. Not sticky.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from headwater.topic_partition import PartitionKey
from headwater.types import PartitionId


@dataclass(frozen=True)
class MemberSubscription:
    """What an assignor knows about a member: its topics and its previous target."""

    member_id: str
    topics: frozenset[str]
    previous: frozenset[PartitionKey] = field(default_factory=frozenset)


Assignor = Callable[
    [Sequence[MemberSubscription], Mapping[str, int]], dict[str, frozenset[PartitionKey]]
]


@functools.lru_cache(maxsize=1024)
def _topic_partitions(topic: str, count: int) -> tuple[PartitionKey, ...]:
    """Every partition of a topic with ``count`` partitions, in order.

    Cached: an assignor needs every partition of every subscribed topic on each rebalance, and
    the same few topics and counts come back each time.
    """
    return tuple(PartitionKey(topic, PartitionId(p)) for p in range(count))


def _partitions(topics: Mapping[str, int], wanted: set[str]) -> list[PartitionKey]:
    return [tp for t in sorted(wanted) for tp in _topic_partitions(t, topics.get(t, 0))]


def uniform(
    members: Sequence[MemberSubscription], topics: Mapping[str, int]
) -> dict[str, frozenset[PartitionKey]]:
    """Balanced, sticky assignment (see the module docstring)."""
    subs = {m.member_id: m.topics for m in members}
    owned: dict[str, set[PartitionKey]] = {m.member_id: set() for m in members}
    everything = _partitions(topics, set().union(*subs.values()) if subs else set())
    valid = set(everything)
    taken: set[PartitionKey] = set()
    # 1. Stickiness: keep previous partitions that still exist and are still subscribed to. When
    # every member subscribes to the same topics the balanced counts are known up front (the
    # members that kept most get the larger share), so keeping stops at each member's quota.
    keep = {
        m.member_id: sorted(tp for tp in m.previous if tp in valid and tp.topic in m.topics)
        for m in members
    }
    quota: dict[str, int] = {}
    if members and len({m.topics for m in members}) == 1:
        base, extra = divmod(len(everything), len(members))
        by_kept = sorted(members, key=lambda m: (-len(keep[m.member_id]), m.member_id))
        quota = {m.member_id: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    for m in sorted(members, key=lambda m: m.member_id):
        limit = quota.get(m.member_id, len(keep[m.member_id]))
        for tp in keep[m.member_id]:
            if len(owned[m.member_id]) >= limit:
                break
            if tp not in taken:
                owned[m.member_id].add(tp)
                taken.add(tp)
    # 2. Free partitions go to the least loaded member that subscribes to their topic (a heap
    # per topic: only that topic's assignments change counts while it is being handed out).
    for topic in sorted({tp.topic for tp in everything}):
        free = [tp for tp in everything if tp.topic == topic and tp not in taken]
        if not free:
            continue
        heap = [(len(owned[mid]), mid) for mid, topics_ in subs.items() if topic in topics_]
        heapq.heapify(heap)
        for tp in free:
            count, mid = heapq.heappop(heap)
            owned[mid].add(tp)
            taken.add(tp)
            heapq.heappush(heap, (count + 1, mid))
    # 3. Balance: move one partition at a time from a member with at least two more than one that
    # may take it. Every move lowers the sum of squared counts, so this ends; it moves only as many
    # partitions as the imbalance needs.
    moved = True
    while moved:
        moved = False
        donors = sorted(owned, key=lambda mid: (-len(owned[mid]), mid))
        receivers = sorted(owned, key=lambda mid: (len(owned[mid]), mid))
        for donor in donors:
            for receiver in receivers:
                if len(owned[donor]) - len(owned[receiver]) < 2:
                    break
                movable = sorted(tp for tp in owned[donor] if tp.topic in subs[receiver])
                if movable:
                    tp = movable[-1]
                    owned[donor].discard(tp)
                    owned[receiver].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {mid: frozenset(tps) for mid, tps in owned.items()}


def range_(
    members: Sequence[MemberSubscription], topics: Mapping[str, int]
) -> dict[str, frozenset[PartitionKey]]:
    """Kafka's range assignment (see the module docstring)."""
    owned: dict[str, set[PartitionKey]] = {m.member_id: set() for m in members}
    for topic in sorted(set().union(*(m.topics for m in members)) if members else set()):
        subscribers = sorted(m.member_id for m in members if topic in m.topics)
        count = topics.get(topic, 0)
        share, extra = divmod(count, len(subscribers))
        start = 0
        for i, mid in enumerate(subscribers):
            n = share + (1 if i < extra else 0)
            owned[mid].update(_topic_partitions(topic, count)[start : start + n])
            start += n
    return {mid: frozenset(tps) for mid, tps in owned.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
