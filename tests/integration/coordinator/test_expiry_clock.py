"""Expiry by each member's own deadline, from a coordinator's first sweep (the Coordinator core on
real Redis and a real broker, with an explicit clock): a grace only for deadlines that fell while
no coordinator swept -- not the flat session-long wait after every start it replaces."""

from __future__ import annotations

import pytest

from headwater_coordinator.coordinator import Coordinator
from headwater_coordinator.metadata import BrokerMetadata
from tests.integration.coordinator.client import make_topic
from tests.integration.coordinator.driver import StoreDriver
from tests.support import ServiceProcess

T = 1_800_000_000_000  # a member's last heartbeat (epoch ms)
SESSION_MS = 6_000


class Restarted:
    """A freshly started coordinator process over the driver's Redis keyspace."""

    def __init__(self, driver: StoreDriver, broker: ServiceProcess) -> None:
        self.driver = driver
        self.coordinator = Coordinator(
            group_store=driver.groups,
            offset_store=driver.offsets,
            liveness=driver.liveness,
            metadata=BrokerMetadata([broker.url]),
            session_timeout_ms=45_000,  # the default: what the old start-up grace waited
            sweep_interval_ms=500,
        )

    def sweep(self, now: int) -> int:
        return self.driver.loop.run_until_complete(self.coordinator.sweep(now))

    def close(self) -> None:
        self.driver.loop.run_until_complete(self.coordinator.metadata.close())


@pytest.fixture
def group(driver: StoreDriver, broker: ServiceProcess) -> str:
    """A group whose one member heartbeated last at T, with a 6 s session."""
    topic = make_topic(broker, 2)
    driver.sizes = {topic: 2}
    driver.heartbeat("g", now=T, epoch=0, topics={topic}, session_ms=SESSION_MS)
    return "g"


def members(driver: StoreDriver, group: str) -> int:
    return len(driver.load(group).members)


def last_sweep_at(driver: StoreDriver, ms: int | None) -> None:
    if ms is not None:
        driver.loop.run_until_complete(driver.liveness.record_sweep(ms))


@pytest.mark.parametrize(
    ("last_sweep", "started", "expired_at"),
    [
        # Restarted before the deadline: expired at it, 6 s after the last heartbeat.
        (T + 1_000, T + 3_500, T + SESSION_MS),
        # Another process swept until just before the deadline: no gap, expired at it.
        (T + 5_600, T + 6_100, T + 6_100),
        # The deadline fell while none swept: a full session from the restart.
        (T + 1_000, T + 10_000, T + 10_000 + SESSION_MS),
        # No sweep ever recorded (a keyspace from before the clock existed): the same grace.
        (None, T + 10_000, T + 10_000 + SESSION_MS),
    ],
)
def test_a_silent_member_is_expired_by_its_own_deadline(
    driver: StoreDriver,
    broker: ServiceProcess,
    group: str,
    last_sweep: int | None,
    started: int,
    expired_at: int,
) -> None:
    last_sweep_at(driver, last_sweep)
    coordinator = Restarted(driver, broker)
    try:
        assert not coordinator.coordinator.expiring  # heartbeats expire no one before a sweep
        if started < expired_at:
            assert coordinator.sweep(started) == 0
            assert coordinator.coordinator.expiring
            assert coordinator.sweep(expired_at - 1) == 0
            assert members(driver, group) == 1
        assert coordinator.sweep(expired_at) == 1
        assert members(driver, group) == 0
    finally:
        coordinator.close()


def test_a_member_that_heartbeats_after_the_gap_keeps_its_partitions(
    driver: StoreDriver, broker: ServiceProcess, group: str
) -> None:
    (member_id,) = driver.load(group).members
    before = driver.load(group).members[member_id].assigned
    last_sweep_at(driver, T + 1_000)
    coordinator = Restarted(driver, broker)
    try:
        # Down for 20 s, three sessions: it re-arms on its first sweep, then the member is back.
        assert coordinator.sweep(T + 21_000) == 0
        result = driver.heartbeat(
            group, now=T + 21_500, epoch=1, member_id=member_id, owned=before, session_ms=SESSION_MS
        )
        assert (result.member_id, result.assignment) == (member_id, before)
        assert coordinator.sweep(T + 21_500 + SESSION_MS - 1) == 0
        assert coordinator.sweep(T + 21_500 + SESSION_MS) == 1
    finally:
        coordinator.close()


def test_a_coordinator_shutting_down_expires_no_one(
    driver: StoreDriver, broker: ServiceProcess, group: str
) -> None:
    """After ``stop_expiring`` (SIGTERM): no sweep expires, heartbeats expire no one, and the
    sweeper loop ends; the member's deadline is left to another process's clock."""
    last_sweep_at(driver, T + 1_000)
    coordinator = Restarted(driver, broker)
    try:
        assert coordinator.sweep(T + 3_000) == 0
        assert coordinator.coordinator.expiring
        coordinator.coordinator.stop_expiring()
        assert not coordinator.coordinator.expiring
        assert coordinator.sweep(T + SESSION_MS + 1_000) == 0
        assert members(driver, group) == 1
        driver.loop.run_until_complete(coordinator.coordinator.run_sweeper())  # returns at once
        assert members(driver, group) == 1
        # Another process, keeping the clock without a gap, expires it by its own deadline.
        successor = Restarted(driver, broker)
        try:
            assert successor.sweep(T + 4_000) == 0
            assert successor.sweep(T + SESSION_MS) == 1
        finally:
            successor.close()
    finally:
        coordinator.close()
