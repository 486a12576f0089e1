"""Batched group transactions in real Redis: requests queued behind a group's lock run as one
transaction (one epoch, one assignor run) and each still gets its own answer or error."""

from __future__ import annotations

import asyncio

from headwater.groups.errors import FencedMemberEpochError, UnknownMemberError
from headwater.types import MemberEpoch, PartitionId
from headwater_coordinator.group import GroupState, HeartbeatRequest, HeartbeatResult
from headwater_coordinator.member import Member
from headwater_coordinator.store.batch import Finish
from tests.integration.coordinator.driver import StoreDriver, assert_no_double_owner
from tests.support import unique

T0 = 1_000_000


def request(member_id: str | None, epoch: int, topics: set[str] | None = None) -> HeartbeatRequest:
    return HeartbeatRequest(
        member_id=member_id,
        member_epoch=MemberEpoch(epoch),
        instance_id=None,
        topics=frozenset(topics) if topics is not None else None,
        owned=set() if epoch > 0 else None,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=60_000,
        assignor=None,
    )


async def heartbeat(driver: StoreDriver, group: str, req: HeartbeatRequest) -> HeartbeatResult:
    """One heartbeat in two phases, as Coordinator does it."""

    async def operation(state: GroupState) -> Finish:
        admitted = state.admit(req, T0)

        async def finish() -> HeartbeatResult:
            if isinstance(admitted, Member):
                return state.settle(admitted, req, T0, driver.sizes)
            state.after_leave(admitted, T0, driver.sizes)
            return admitted

        return finish

    result = (await driver.groups.transact_phased(group, operation)).result
    assert isinstance(result, HeartbeatResult)
    return result


def test_a_burst_of_joins_shares_one_epoch_and_one_target(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 40}

    async def burst() -> list[HeartbeatResult]:
        return await asyncio.gather(
            *(heartbeat(driver, group, request(None, 0, {topic})) for _ in range(20))
        )

    results = driver.loop.run_until_complete(burst())
    state = driver.load(group)
    # The first join found the lock free and ran alone; the other 19 queued and ran together.
    assert state.epoch == 2
    assert state.assignment_epoch == 2
    assert len(state.members) == 20
    assert_no_double_owner(state)
    targets = [state.members[r.member_id].target for r in results]
    assert sorted(len(t) for t in targets) == [2] * 20
    assert set().union(*targets) == {(topic, PartitionId(p)) for p in range(40)}
    first = results[0]
    # The first joiner was given all 40 partitions; it keeps them until its next heartbeat
    # revokes 38, so the others get none yet (never a second owner).
    assert len(first.assignment) == 40
    assert state.members[first.member_id].assigned == first.assignment
    for r in results[1:]:
        assert r.member_epoch == 2
        assert r.assignment == set()


def test_errors_in_a_batch_are_each_requests_own(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 6}
    a = driver.heartbeat(group, now=T0, epoch=0, topics={topic})
    b = driver.heartbeat(group, now=T0, epoch=0, topics={topic})
    before = driver.load(group)

    async def burst() -> list[HeartbeatResult | BaseException]:
        lock = driver.groups.batches.lock(group)
        async with lock:  # hold the group so the next three queue into one batch
            tasks = [
                asyncio.ensure_future(heartbeat(driver, group, request(a.member_id, 99))),
                asyncio.ensure_future(heartbeat(driver, group, request(b.member_id, -1))),
                asyncio.ensure_future(
                    heartbeat(driver, group, request(b.member_id, b.member_epoch))
                ),
            ]
            await asyncio.sleep(0.01)
        return await asyncio.gather(*tasks, return_exceptions=True)

    fenced, left, after_leave = driver.loop.run_until_complete(burst())
    assert isinstance(fenced, FencedMemberEpochError)
    assert isinstance(left, HeartbeatResult)
    assert left.member_epoch == -1
    # Admitted after b left in the same batch: b is no longer a member.
    assert isinstance(after_leave, UnknownMemberError)
    state = driver.load(group)
    assert set(state.members) == {a.member_id}
    assert state.epoch == before.epoch + 1
    assert state.members[a.member_id].target == {(topic, PartitionId(p)) for p in range(6)}
    assert_no_double_owner(state)


def test_a_batch_of_only_errors_writes_nothing(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 4}
    a = driver.heartbeat(group, now=T0, epoch=0, topics={topic})
    raw_before = driver.loop.run_until_complete(driver.redis.hgetall(driver.keys.group(group)))

    async def burst() -> list[HeartbeatResult | BaseException]:
        lock = driver.groups.batches.lock(group)
        async with lock:
            tasks = [
                asyncio.ensure_future(heartbeat(driver, group, request(a.member_id, 7))),
                asyncio.ensure_future(heartbeat(driver, group, request("nobody", 1))),
            ]
            await asyncio.sleep(0.01)
        return await asyncio.gather(*tasks, return_exceptions=True)

    fenced, unknown = driver.loop.run_until_complete(burst())
    assert isinstance(fenced, FencedMemberEpochError)
    assert isinstance(unknown, UnknownMemberError)
    raw_after = driver.loop.run_until_complete(driver.redis.hgetall(driver.keys.group(group)))
    assert raw_after == raw_before


def test_requests_of_a_cancelled_batch_are_run_by_the_next_holder(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 4}
    started = asyncio.Event()
    calls = 0

    async def stalls_once(state: GroupState) -> Finish:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first holder's batch hangs here until its caller gives up
            started.set()
            await asyncio.sleep(3600)
        return await join(state)

    async def join(state: GroupState) -> Finish:
        req = request(None, 0, {topic})
        admitted = state.admit(req, T0)

        async def finish() -> HeartbeatResult:
            assert isinstance(admitted, Member)
            return state.settle(admitted, req, T0, driver.sizes)

        return finish

    async def scenario() -> tuple[bool, object]:
        lock = driver.groups.batches.lock(group)
        async with lock:  # both queue, so the first to get the lock takes both
            first = asyncio.ensure_future(driver.groups.transact_phased(group, stalls_once))
            second = asyncio.ensure_future(driver.groups.transact_phased(group, join))
            await asyncio.sleep(0.01)
        await asyncio.wait_for(started.wait(), 5)
        first.cancel()
        applied = await asyncio.wait_for(second, 5)
        await asyncio.wait([first])
        return first.cancelled(), applied.result

    cancelled, joined = driver.loop.run_until_complete(scenario())
    assert cancelled
    assert isinstance(joined, HeartbeatResult)
    # The next holder ran both requests of the abandoned batch: the stalled one, and its own.
    assert calls == 2
    state = driver.load(group)
    assert len(state.members) == 2
    assert joined.member_id in state.members
    assert_no_double_owner(state)
