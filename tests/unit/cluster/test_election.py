"""Partition decisions: clean and unclean election, ISR cleanup, preferred leaders,
reassignment steps and the typed refusals of stale ISR proposals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from headwater.errors import (
    FencedLeaderEpochError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    StalePartitionEpochError,
    UnknownLeaderEpochError,
)
from headwater.types import BrokerId
from headwater_broker.cluster.election import (
    IsrMember,
    IsrProposal,
    apply_isr_proposal,
    reconcile,
    start_reassignment,
)
from headwater_broker.cluster.state import (
    NO_LEADER,
    BrokerEpoch,
    LeaderEpoch,
    PartitionEpoch,
    PartitionState,
)
from tests.unit.cluster.states import brokers, partition


def ids(*values: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(v) for v in values)


def test_a_healthy_partition_stays_as_it_is() -> None:
    assert reconcile(partition([0, 1, 2]), brokers([0, 1, 2]), False) is None


def test_a_fenced_leader_is_replaced_by_the_next_in_sync_replica_in_replica_order() -> None:
    p = partition([0, 1, 2], isr=[0, 2, 1], leader_epoch=4, partition_epoch=7)
    after = reconcile(p, brokers([1, 2], fenced=[0]), False)
    assert after is not None
    assert after.leader == 1  # replica order decides, not ISR order
    assert after.isr == ids(2, 1)
    assert after.leader_epoch == 5
    assert after.partition_epoch == 8
    assert after.unclean is False


def test_a_fenced_follower_leaves_the_isr_without_a_leader_change() -> None:
    p = partition([0, 1, 2], leader_epoch=3, partition_epoch=3)
    after = reconcile(p, brokers([0, 1], fenced=[2]), False)
    assert after is not None
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (
        0,
        ids(0, 1),
        3,
        4,
    )


def test_with_every_in_sync_replica_fenced_the_partition_goes_offline_and_keeps_its_isr() -> None:
    p = partition([0, 1, 2], isr=[0, 1], leader_epoch=2, partition_epoch=5)
    after = reconcile(p, brokers([2], fenced=[0, 1]), False)
    assert after is not None
    assert after.leader == NO_LEADER
    assert after.isr == ids(0, 1)  # the last in-sync replicas are still known when they return
    assert after.leader_epoch == 3
    # Nothing more to do until one of them returns.
    assert reconcile(after, brokers([2], fenced=[0, 1]), False) is None
    # The last in-sync replica returns: elected cleanly.
    back = reconcile(after, brokers([1, 2], fenced=[0]), False)
    assert back is not None
    assert (back.leader, back.isr, back.leader_epoch, back.unclean) == (1, ids(1), 4, False)


def test_unclean_election_only_when_the_topic_allows_it_and_every_isr_member_is_fenced() -> None:
    p = partition([0, 1, 2], isr=[0], leader_epoch=2, partition_epoch=5)
    offline = reconcile(p, brokers([1, 2], fenced=[0]), unclean_allowed=False)
    assert offline is not None
    assert offline.leader == NO_LEADER
    unclean = reconcile(p, brokers([1, 2], fenced=[0]), unclean_allowed=True)
    assert unclean is not None
    assert (unclean.leader, unclean.isr, unclean.unclean, unclean.leader_epoch) == (
        1,
        ids(1),
        True,
        3,
    )
    # The next leader change clears the mark.
    restored = reconcile(unclean, brokers([0, 1, 2]), unclean_allowed=True)
    assert restored is None or restored.leader == 1
    # A shutting-down ISR member still holds the data: no unclean election while it lives.
    waiting = reconcile(p, brokers([1, 2], shutting_down=[0]), unclean_allowed=True)
    assert waiting is not None
    assert waiting.leader == NO_LEADER


def test_the_preferred_replica_takes_leadership_back_once_in_sync() -> None:
    p = partition([0, 1, 2], isr=[1, 2], leader=1, leader_epoch=5, partition_epoch=9)
    assert reconcile(p, brokers([0, 1, 2]), False) is None  # 0 is back but not in sync yet
    in_sync = partition([0, 1, 2], isr=[0, 1, 2], leader=1, leader_epoch=5, partition_epoch=10)
    after = reconcile(in_sync, brokers([0, 1, 2]), False)
    assert after is not None
    assert (after.leader, after.leader_epoch, after.partition_epoch) == (0, 6, 11)


def test_a_non_preferred_valid_leader_is_kept_rather_than_moved_to_another_non_preferred() -> None:
    # 0 (preferred) is fenced; 2 leads; 1 rejoined: leadership stays with 2 until 0 returns.
    p = partition([0, 1, 2], isr=[1, 2], leader=2, leader_epoch=5, partition_epoch=9)
    assert reconcile(p, brokers([1, 2], fenced=[0]), False) is None


def test_a_shutting_down_leader_hands_over_and_leaves_the_isr() -> None:
    p = partition([0, 1], leader_epoch=1, partition_epoch=1)
    after = reconcile(p, brokers([1], shutting_down=[0]), False)
    assert after is not None
    assert (after.leader, after.isr) == (1, ids(1))


def test_reassignment_adds_then_switches_once_the_targets_are_in_sync() -> None:
    p = partition([0, 1], leader_epoch=2, partition_epoch=4)
    started = start_reassignment(p, ids(1, 2), brokers([0, 1, 2]))
    assert started.replicas == ids(1, 2, 0)
    assert (started.adding, started.removing) == (ids(2), ids(0))
    assert started.isr == ids(0, 1)
    assert started.partition_epoch == 5
    # Broker 2 has not caught up: the list cannot switch yet, but the first target (1) is in
    # sync and is the preferred replica now, so it takes leadership from the leaving 0 at once.
    moving = reconcile(started, brokers([0, 1, 2]), False)
    assert moving is not None
    assert (moving.replicas, moving.adding, moving.removing) == (ids(1, 2, 0), ids(2), ids(0))
    assert (moving.leader, moving.leader_epoch, moving.isr) == (1, 3, ids(0, 1))
    assert reconcile(moving, brokers([0, 1, 2]), False) is None
    # 2 joins the ISR: the list switches and 0 leaves it.
    caught_up = replace(moving, isr=ids(0, 1, 2), partition_epoch=PartitionEpoch(7))
    done = reconcile(caught_up, brokers([0, 1, 2]), False)
    assert done is not None
    assert (done.replicas, done.isr, done.adding, done.removing) == (ids(1, 2), ids(1, 2), (), ())
    assert (done.leader, done.leader_epoch, done.partition_epoch) == (1, 3, 8)


def test_a_reassignment_completing_moves_a_leader_outside_the_targets() -> None:
    # Only 2 is new and 0 leads; 0 is removed: when the list switches, 1 (first target) leads.
    p = partition([0, 1], isr=[0, 1, 2], leader=0, adding=[], partition_epoch=3)
    started = start_reassignment(p, ids(2, 1), brokers([0, 1, 2]))
    done = reconcile(started, brokers([0, 1, 2]), False)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == (ids(2, 1), ids(1, 2), 2, 1)


def test_reassigning_back_to_the_original_replicas_cancels() -> None:
    p = partition([0, 1], partition_epoch=4)
    started = start_reassignment(p, ids(1, 2), brokers([0, 1, 2]))
    cancelled = start_reassignment(started, ids(0, 1), brokers([0, 1, 2]))
    assert (cancelled.replicas, cancelled.adding, cancelled.removing) == (ids(0, 1), (), ())


def test_invalid_reassignments_are_refused() -> None:
    p = partition([0, 1])
    with pytest.raises(InvalidReplicaAssignmentError, match="at least one replica"):
        start_reassignment(p, (), brokers([0, 1]))
    with pytest.raises(InvalidReplicaAssignmentError, match="repeats"):
        start_reassignment(p, ids(1, 1), brokers([0, 1]))
    with pytest.raises(InvalidReplicaAssignmentError, match=r"Brokers \[7\] are not registered"):
        start_reassignment(p, ids(0, 7), brokers([0, 1]))


def proposal(
    p: PartitionState,
    members: list[tuple[int, int]],
    leader: int | None = None,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
) -> IsrProposal:
    return IsrProposal(
        topic=p.topic,
        partition=p.partition,
        leader_id=BrokerId(p.leader if leader is None else leader),
        leader_epoch=LeaderEpoch(p.leader_epoch if leader_epoch is None else leader_epoch),
        partition_epoch=PartitionEpoch(
            p.partition_epoch if partition_epoch is None else partition_epoch
        ),
        isr=tuple(IsrMember(BrokerId(b), BrokerEpoch(e)) for b, e in members),
    )


def test_an_isr_shrink_and_expand_bump_the_partition_epoch_only() -> None:
    p = partition([0, 1, 2], leader_epoch=3, partition_epoch=6)
    shrunk = apply_isr_proposal(p, proposal(p, [(0, 1), (1, 1)]), brokers([0, 1, 2]))
    assert (shrunk.isr, shrunk.leader_epoch, shrunk.partition_epoch) == (ids(0, 1), 3, 7)
    grown = apply_isr_proposal(
        shrunk, proposal(shrunk, [(2, 1), (0, 1), (1, 1)]), brokers([0, 1, 2])
    )
    assert (grown.isr, grown.partition_epoch) == (ids(0, 1, 2), 8)  # kept in replica order
    assert (
        apply_isr_proposal(grown, proposal(grown, [(0, 1), (1, 1), (2, 1)]), brokers([0, 1, 2]))
        is grown
    )


def test_stale_isr_proposals_get_their_typed_errors() -> None:
    p = partition([0, 1, 2], leader_epoch=3, partition_epoch=6)
    live = brokers([0, 1, 2])
    with pytest.raises(FencedLeaderEpochError, match="leader epoch 2 is older than 3"):
        apply_isr_proposal(p, proposal(p, [(0, 1)], leader_epoch=2), live)
    with pytest.raises(UnknownLeaderEpochError, match="leader epoch 4 is newer than 3"):
        apply_isr_proposal(p, proposal(p, [(0, 1)], leader_epoch=4), live)
    with pytest.raises(StalePartitionEpochError, match="partition epoch 5; the partition is at 6"):
        apply_isr_proposal(p, proposal(p, [(0, 1)], partition_epoch=5), live)
    with pytest.raises(NotLeaderOrFollowerError) as not_leader:
        apply_isr_proposal(p, proposal(p, [(1, 1)], leader=1), live)
    assert not_leader.value.to_body()["leader_id"] == 0
    assert not_leader.value.to_body()["leader_url"] == "http://127.0.0.1:9000"


def test_isr_proposals_must_be_possible() -> None:
    p = partition([0, 1, 2], isr=[0, 1])
    live = brokers([0, 1], fenced=[2])
    with pytest.raises(InvalidRequestError, match="lacks the leader 0"):
        apply_isr_proposal(p, proposal(p, [(1, 1)]), live)
    with pytest.raises(InvalidRequestError, match=r"brokers \[5\] are not replicas"):
        apply_isr_proposal(p, proposal(p, [(0, 1), (5, 1)]), live)
    with pytest.raises(InvalidRequestError, match="broker 2 is not active"):
        apply_isr_proposal(p, proposal(p, [(0, 1), (1, 1), (2, 1)]), live)
    # A follower that fetched as an earlier incarnation cannot be added (KIP-903).
    with pytest.raises(StaleBrokerEpochError, match="fetched at broker epoch 0"):
        apply_isr_proposal(p, proposal(p, [(0, 1), (1, 1), (2, 0)]), brokers([0, 1, 2]))
    # A shrink is always possible, whatever the leaving members' state.
    shrunk = apply_isr_proposal(p, proposal(p, [(0, 1)]), live)
    assert shrunk.isr == ids(0)


def reports(**by_broker: list[int]) -> dict[BrokerId, frozenset[BrokerId]]:
    return {BrokerId(int(b[1:])): frozenset(ids(*v)) for b, v in by_broker.items()}


def test_a_leader_every_other_in_sync_replica_reports_unreachable_is_replaced() -> None:
    p = partition([0, 1, 2], leader_epoch=3, partition_epoch=3)
    after = reconcile(p, brokers([0, 1, 2]), False, reports(b1=[0], b2=[0]))
    assert after is not None
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (
        1,
        ids(1, 2),
        4,
        4,
    )
    # Once out of the ISR it is not the preferred leader's turn until it rejoins.
    assert reconcile(after, brokers([0, 1, 2]), False, reports(b1=[0], b2=[0])) is None


@pytest.mark.parametrize(
    ("replicas", "isr", "said", "why"),
    [
        ([0, 1, 2], [0, 1, 2], {"b1": [0]}, "one follower: it may be the one cut off"),
        ([0, 1], [0, 1], {"b1": [0]}, "one follower in all: no one to confirm"),
        ([0, 1, 2], [0, 1, 2], {"b1": [0], "b2": [1]}, "the other reports someone else"),
        ([0, 1, 2], [0, 1], {"b1": [0], "b2": [0]}, "broker 2 is not in sync"),
    ],
)
def test_a_leader_is_not_moved_on_a_word_that_could_be_the_followers_fault(
    replicas: list[int], isr: list[int], said: dict[str, list[int]], why: str
) -> None:
    p = partition(replicas, isr=isr)
    assert reconcile(p, brokers(replicas), False, reports(**said)) is None, why


def test_a_fenced_reporter_does_not_count() -> None:
    p = partition([0, 1, 2])
    after = reconcile(p, brokers([0, 1], fenced=[2]), False, reports(b1=[0], b2=[0]))
    assert after is not None
    assert (after.leader, after.isr) == (0, ids(0, 1))  # only the fenced follower leaves
