"""The assignors: complete, disjoint, balanced; uniform moves as little as possible."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.topic_partition import PartitionKey
from headwater.types import PartitionId
from headwater_coordinator.assignor import MemberSubscription, range_, uniform


def tps(topic: str, *partitions: int) -> frozenset[PartitionKey]:
    return frozenset(PartitionKey(topic, PartitionId(p)) for p in partitions)


def members(n: int, topics: frozenset[str] = frozenset({"t"})) -> list[MemberSubscription]:
    return [MemberSubscription(f"m{i:02d}", topics) for i in range(n)]


def test_range_gives_contiguous_ranges_with_the_extra_partitions_first() -> None:
    result = range_(members(3), {"t": 8})
    assert result == {"m00": tps("t", 0, 1, 2), "m01": tps("t", 3, 4, 5), "m02": tps("t", 6, 7)}


def test_range_assigns_each_topic_among_its_own_subscribers() -> None:
    subs = [
        MemberSubscription("a", frozenset({"x", "y"})),
        MemberSubscription("b", frozenset({"y"})),
    ]
    result = range_(subs, {"x": 2, "y": 3})
    assert result == {"a": tps("x", 0, 1) | tps("y", 0, 1), "b": tps("y", 2)}


def test_uniform_balances_twelve_partitions_over_three_members() -> None:
    result = uniform(members(3), {"t": 12})
    assert sorted(len(v) for v in result.values()) == [4, 4, 4]
    assert frozenset().union(*result.values()) == tps("t", *range(12))


def test_uniform_join_moves_only_what_balance_needs() -> None:
    first = uniform(members(3), {"t": 12})
    subs = [MemberSubscription(mid, frozenset({"t"}), first[mid]) for mid in first]
    subs.append(MemberSubscription("m03", frozenset({"t"})))
    second = uniform(subs, {"t": 12})
    assert len(second["m03"]) == 3
    for mid in ("m00", "m01", "m02"):
        assert len(second[mid]) == 3
        assert second[mid] <= first[mid]  # survivors only give partitions up


def test_uniform_leave_keeps_survivors_partitions() -> None:
    first = uniform(members(4), {"t": 12})
    subs = [MemberSubscription(m, frozenset({"t"}), first[m]) for m in ("m00", "m01", "m02")]
    second = uniform(subs, {"t": 12})
    for sub in subs:
        assert second[sub.member_id] >= first[sub.member_id]
        assert len(second[sub.member_id]) == 4


def test_uniform_picks_up_new_partitions() -> None:
    first = uniform(members(2), {"t": 4})
    subs = [MemberSubscription(m, frozenset({"t"}), first[m]) for m in first]
    second = uniform(subs, {"t": 6})
    assert frozenset().union(*second.values()) == tps("t", *range(6))
    assert sorted(len(v) for v in second.values()) == [3, 3]


def test_uniform_never_gives_a_member_a_topic_it_does_not_subscribe_to() -> None:
    subs = [
        MemberSubscription("a", frozenset({"x"})),
        MemberSubscription("b", frozenset({"x", "y"})),
    ]
    result = uniform(subs, {"x": 2, "y": 4})
    assert all(t == "x" for t, _ in result["a"])
    assert result["a"] | result["b"] == tps("x", 0, 1) | tps("y", 0, 1, 2, 3)
    assert sorted(len(v) for v in result.values()) == [2, 4]


@settings(max_examples=60, deadline=None)
@given(
    n_members=st.integers(min_value=1, max_value=12),
    sizes=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 20), min_size=1),
    seed=st.randoms(use_true_random=False),
)
def test_both_assignors_are_complete_and_disjoint(
    n_members: int, sizes: dict[str, int], seed: object
) -> None:
    import random

    rng = random.Random(str(seed))
    topics = sorted(sizes)
    subs = [
        MemberSubscription(f"m{i}", frozenset(rng.sample(topics, rng.randint(1, len(topics)))))
        for i in range(n_members)
    ]
    subscribed = set().union(*(s.topics for s in subs))
    expected = {(t, PartitionId(p)) for t in subscribed for p in range(sizes[t])}
    for assignor in (uniform, range_):
        result = assignor(subs, sizes)
        counts = Counter(tp for v in result.values() for tp in v)
        assert set(counts) == expected
        assert all(c == 1 for c in counts.values())
        for sub in subs:
            assert all(t in sub.topics for t, _ in result[sub.member_id])
    homogeneous = [MemberSubscription(s.member_id, frozenset(topics)) for s in subs]
    loads = [len(v) for v in uniform(homogeneous, sizes).values()]
    assert max(loads) - min(loads) <= 1
