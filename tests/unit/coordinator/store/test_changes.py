"""Change notifications: a notice wakes exactly the parked heartbeats of the members it names."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from headwater_coordinator.store.changes import GroupChanges, notice


def changes() -> GroupChanges:
    # Never connects: wake() and wait() work on this process's events only.
    return GroupChanges(Redis(), "unused")


def test_a_notice_wakes_the_members_it_names_in_its_group_only() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        c = changes()
        a = c.watch("g1", "a")
        b = c.watch("g1", "b")
        other = c.watch("g2", "a")  # the same member id in another group
        c.wake(notice("g1", ["a", "x"]))
        return a.is_set(), b.is_set(), other.is_set()

    assert asyncio.run(scenario()) == (True, False, False)


def test_a_woken_member_waits_on_a_fresh_event_next_time() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        c = changes()
        first = c.watch("g", "m")
        assert c.watch("g", "m") is first  # two parked requests of one member share an event
        c.wake(notice("g", ["m"]))
        second = c.watch("g", "m")
        woken = await GroupChanges.wait(first, 0.01)
        timed_out = await GroupChanges.wait(second, 0.01)
        return woken, timed_out, second is first

    assert asyncio.run(scenario()) == (True, False, False)
