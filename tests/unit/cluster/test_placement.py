"""Replica placement: distinct replicas, rack spread, leader and replica balance, refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.errors import InvalidReplicationFactorError
from headwater.types import BrokerId
from headwater_broker.cluster.placement import (
    Candidate,
    Load,
    check_replication_factor,
    place,
)


def brokers(n: int, racks: int = 0) -> list[Candidate]:
    return [Candidate(BrokerId(i), f"rack-{i % racks}" if racks else None) for i in range(n)]


def counts(placed: list[tuple[BrokerId, ...]], n: int) -> tuple[list[int], list[int]]:
    replicas = [0] * n
    leaders = [0] * n
    for assignment in placed:
        leaders[assignment[0]] += 1
        for b in assignment:
            replicas[b] += 1
    return replicas, leaders


@st.composite
def clusters(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(1, 12))
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 120))
    return n, rf, partitions


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_rack_unaware_placement_balances_leaders_and_replicas_within_one(
    case: tuple[int, int, int],
) -> None:
    n, rf, partitions = case
    placed = place(brokers(n), partitions, rf)
    assert len(placed) == partitions
    for assignment in placed:
        assert len(assignment) == rf
        assert len(set(assignment)) == rf
        assert all(0 <= b < n for b in assignment)
    replicas, leaders = counts(placed, n)
    assert sum(replicas) == partitions * rf
    assert max(replicas) - min(replicas) <= 1
    assert max(leaders) - min(leaders) <= 1


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 12),
    rack_count=st.integers(1, 6),
    partitions=st.integers(1, 60),
    data=st.data(),
)
def test_each_partition_spans_as_many_racks_as_it_can(
    n: int, rack_count: int, partitions: int, data: st.DataObject
) -> None:
    # Racks of any sizes: each broker drawn onto one of the racks.
    racks = [data.draw(st.integers(0, rack_count - 1)) for _ in range(n)]
    candidates = [Candidate(BrokerId(i), f"r{racks[i]}") for i in range(n)]
    rf = data.draw(st.integers(1, n))
    distinct_racks = len(set(racks))
    for assignment in place(candidates, partitions, rf):
        assert len(set(assignment)) == rf
        spanned = {racks[b] for b in assignment}
        assert len(spanned) == min(rf, distinct_racks)
    _, leaders = counts(place(candidates, partitions, rf), n)
    assert max(leaders) - min(leaders) <= 1


def test_even_racks_alternate_and_balance() -> None:
    # Six brokers on three racks of two, factor 3: every partition on all three racks.
    candidates = brokers(6, racks=3)
    placed = place(candidates, 12, 3)
    for assignment in placed:
        assert sorted(b % 3 for b in assignment) == [0, 1, 2]
    replicas, leaders = counts(placed, 6)
    assert replicas == [6] * 6
    assert leaders == [2] * 6


def test_a_partly_racked_cluster_is_placed_rack_unaware() -> None:
    candidates = [
        Candidate(BrokerId(0), "a"),
        Candidate(BrokerId(1), "a"),
        Candidate(BrokerId(2), None),
    ]
    placed = place(candidates, 3, 2)
    replicas, leaders = counts(placed, 3)
    assert replicas == [2, 2, 2]
    assert leaders == [1, 1, 1]


def test_new_topics_fill_the_least_loaded_brokers() -> None:
    load = Load()
    first = place(brokers(3), 2, 1, load)
    assert sorted(a[0] for a in first) == [0, 1]
    second = place(brokers(3), 1, 1, load)
    assert second == [(BrokerId(2),)]
    # A broker that joins later takes the next partitions until it has caught up.
    joined = place(brokers(4), 3, 1, load)
    assert joined[0] == (BrokerId(3),)


def test_placement_is_deterministic() -> None:
    assert place(brokers(5), 20, 3) == place(brokers(5), 20, 3)


def test_default_factor_is_three_or_the_active_brokers() -> None:
    assert check_replication_factor(None, 1) == 1
    assert check_replication_factor(-1, 2) == 2
    assert check_replication_factor(None, 5) == 3
    assert check_replication_factor(2, 5) == 2


def test_a_factor_larger_than_the_active_brokers_is_refused_with_both_numbers() -> None:
    with pytest.raises(InvalidReplicationFactorError) as refused:
        check_replication_factor(4, 3)
    assert refused.value.message == (
        "Replication factor 4 is larger than the number of active brokers, 3"
    )
    assert refused.value.error_code == 42204
    with pytest.raises(InvalidReplicationFactorError, match="0 brokers are active"):
        check_replication_factor(None, 0)
    with pytest.raises(InvalidReplicationFactorError, match="at least 1, got 0"):
        check_replication_factor(0, 3)
    with pytest.raises(InvalidReplicationFactorError):
        place(brokers(2), 1, 3)
