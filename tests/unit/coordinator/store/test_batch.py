"""Applying a batch: each request's error is its own, and a rejected request leaves no group."""

from __future__ import annotations

import asyncio

from headwater.groups.errors import UnknownMemberError
from headwater.types import MemberEpoch
from headwater_coordinator.group import GroupState, HeartbeatRequest, HeartbeatResult
from headwater_coordinator.store.batch import Applied, Finish, Pending, answer, apply

T0 = 1_000_000


def request(member_id: str | None, epoch: int, assignor: str | None) -> HeartbeatRequest:
    return HeartbeatRequest(
        member_id=member_id,
        member_epoch=MemberEpoch(epoch),
        instance_id=None,
        topics=frozenset({"t"}),
        owned=None,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=60_000,
        assignor=assignor,
    )


def admit(req: HeartbeatRequest) -> Pending:
    """A heartbeat's first phase is admission; its second settles it (as Coordinator does)."""

    async def operation(state: GroupState) -> Finish:
        admitted = state.admit(req, T0)

        async def finish() -> object:
            assert not isinstance(admitted, HeartbeatResult)
            return state.settle(admitted, req, T0, {"t": 2})

        return finish

    future: asyncio.Future[Applied[object]] = asyncio.get_running_loop().create_future()
    return Pending(operation, future)


def test_a_rejected_first_request_does_not_create_the_group() -> None:
    async def scenario() -> tuple[GroupState, list[object]]:
        state = GroupState("g")
        # The first request names a member that does not exist and asks for "range": it is
        # rejected, so the join after it creates the group with the default assignor.
        batch = [admit(request("ghost", 1, "range")), admit(request(None, 0, None))]
        outcomes = await apply(state, batch)
        answer(batch, outcomes, state)
        results: list[object] = []
        for _, future in batch:
            try:
                results.append(future.result().result)
            except UnknownMemberError as exc:
                results.append(exc)
        return state, results

    state, (rejected, joined) = asyncio.run(scenario())
    assert isinstance(rejected, UnknownMemberError)
    assert isinstance(joined, HeartbeatResult)
    assert state.exists
    assert state.created_ms == T0
    assert state.assignor == "uniform"
    assert set(state.members) == {joined.member_id}
    assert joined.assignment == {("t", 0), ("t", 1)}
