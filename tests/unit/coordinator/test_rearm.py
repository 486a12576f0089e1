"""Re-arming deadlines after a gap in the expiry clock: only deadlines inside the gap move, each
by the member's own session (or rebalance timeout, for a revocation)."""

from __future__ import annotations

from headwater.topic_partition import PartitionKey
from headwater.types import MemberEpoch, PartitionId
from headwater_coordinator.group import GroupState
from headwater_coordinator.member import Member

GAP_FROM, NOW = 10_000, 20_000


def member(member_id: str, last_heartbeat_ms: int, revoke_deadline_ms: int = 0) -> Member:
    return Member(
        member_id=member_id,
        instance_id=None,
        epoch=MemberEpoch(1),
        previous_epoch=MemberEpoch(0),
        topics=frozenset({"t"}),
        session_timeout_ms=6_000,
        rebalance_timeout_ms=30_000,
        joined_ms=0,
        last_heartbeat_ms=last_heartbeat_ms,
        revoking={PartitionKey("t", PartitionId(0))} if revoke_deadline_ms else None,
        revoke_deadline_ms=revoke_deadline_ms,
    )


def test_only_deadlines_inside_the_gap_are_rearmed() -> None:
    state = GroupState("g", exists=True)
    for m in (
        member("before", 3_000),  # session ended at 9 000, while a coordinator swept
        member("edge", 4_000),  # ended at 10 000: the last sweep saw it due
        member("inside", 8_000),  # ended at 14 000, in the gap
        member("at-now", 14_000),  # ends at 20 000, the gap's last instant
        member("after", 15_000),  # ends at 21 000, still ahead
        member("revoking", 15_000, revoke_deadline_ms=12_000),  # revocation ran out in the gap
    ):
        state.members[m.member_id] = m
    rearmed = state.rearm(GAP_FROM, NOW)
    assert sorted(rearmed) == ["at-now", "inside", "revoking"]
    assert state.changed_members == {"at-now", "inside", "revoking"}
    deadlines = {m.member_id: m.deadline_ms for m in state.members.values()}
    assert deadlines == {
        "before": 9_000,
        "edge": 10_000,
        "inside": NOW + 6_000,
        "at-now": NOW + 6_000,
        "after": 21_000,
        # Its session (21 000) was ahead; its revocation gets a full rebalance timeout.
        "revoking": 21_000,
    }
    assert state.members["revoking"].revoke_deadline_ms == NOW + 30_000
    assert state.expire(NOW) == ["before", "edge"]
