"""A restarted coordinator process expires members by their own sessions (6 s here, against the
coordinator's default of 45 s): a killed member's partitions move about 6 s after its last
heartbeat, and a member silenced only by the coordinator's downtime is not expired for it -- nor
by a shutdown that outlasts its session (the process stops expiring at SIGTERM)."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater import AdminClient
from headwater.errors import HeadwaterError
from headwater.groups.client import CoordinatorClient, HeartbeatAnswer
from headwater.topic_partition import TopicPartition
from tests.support import ServiceProcess, free_port, unique
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

SESSION_MS = 6_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ServiceProcess]:
    port, data = free_port(), str(tmp_path / "broker")
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": data, "BROKER_FSYNC": "never"}
    with ServiceProcess("headwater_broker", port, env, tmp_path / "broker.log") as process:
        yield process


@pytest.fixture
def coordinator(
    broker: ServiceProcess, tmp_path: Path, redis_url: str, redis_prefix: str
) -> Iterator[ServiceProcess]:
    """A coordinator with the default session timeout (45 s); members ask for 6 s."""
    port = free_port()
    env = {
        "COORDINATOR_PORT": str(port),
        "COORDINATOR_BROKERS": broker.url,
        "COORDINATOR_REDIS_URL": redis_url,
        "COORDINATOR_KEY_PREFIX": redis_prefix,
        "COORDINATOR_HEARTBEAT_INTERVAL_MS": "300",
        "COORDINATOR_SWEEP_INTERVAL_MS": "100",
    }
    with ServiceProcess("headwater_coordinator", port, env, tmp_path / "coord.log") as process:
        yield process


class Member:
    """A well-behaved member driven by hand: it owns what it is told, at once."""

    def __init__(
        self, client: CoordinatorClient, group: str, topic: str, session_ms: int = SESSION_MS
    ) -> None:
        self.client, self.group, self.topic = client, group, topic
        self.session_ms = session_ms
        self.answer: HeartbeatAnswer | None = None
        self.last_heartbeat = 0.0

    def beat(self) -> HeartbeatAnswer | None:
        """One heartbeat; None while the coordinator does not answer."""
        try:
            self.answer = self.client.heartbeat(
                self.group,
                member_id=None if self.answer is None else self.answer.member_id,
                member_epoch=0 if self.answer is None else self.answer.member_epoch,
                topics=[self.topic],
                owned=None if self.answer is None else self.answer.assignment,
                session_timeout_ms=self.session_ms,
            )
        except (httpx.TransportError, HeadwaterError):
            return None
        self.last_heartbeat = time.monotonic()
        return self.answer

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return frozenset() if self.answer is None else self.answer.assignment


def two_members(
    broker: ServiceProcess, client: CoordinatorClient, session_ms: int = SESSION_MS
) -> tuple[Member, Member]:
    topic, group = unique("t"), unique("g")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 2)
    a, b = Member(client, group, topic, session_ms), Member(client, group, topic, session_ms)

    def balanced() -> bool:
        a.beat()
        b.beat()
        return len(a.owned) == 1 and len(b.owned) == 1 and a.owned != b.owned

    wait_until(balanced, 20, "one partition each")
    return a, b


def test_a_killed_member_moves_by_its_own_session_after_a_restart(
    broker: ServiceProcess, coordinator: ServiceProcess
) -> None:
    with CoordinatorClient(coordinator.url) as client:
        live, killed = two_members(broker, client)
        last_heartbeat = killed.last_heartbeat  # it heartbeats no more
        coordinator.stop()
        coordinator.start()

        def took_over() -> bool:
            live.beat()
            return len(live.owned) == 2

        wait_until(took_over, 30, "the killed member's partition to move")
        moved_after = live.last_heartbeat - last_heartbeat
        # Its own 6 s session (plus a sweep and a heartbeat), not the coordinator's 45 s.
        assert SESSION_MS / 1000 - 0.2 <= moved_after <= SESSION_MS / 1000 + 2.5


def test_downtime_longer_than_a_session_expires_only_the_dead(
    broker: ServiceProcess, coordinator: ServiceProcess
) -> None:
    with CoordinatorClient(coordinator.url) as client:
        alive, _dead = two_members(broker, client)  # _dead heartbeats no more
        assert alive.answer is not None
        member_id, mine = alive.answer.member_id, alive.owned
        coordinator.stop()
        time.sleep(SESSION_MS / 1000 + 2)  # both sessions end while no coordinator runs
        launched = time.monotonic()  # the new process re-arms the sessions from its start on
        coordinator.start()
        restarted = time.monotonic()  # ready: the start can take a while on a busy machine
        # The live member is back at its next heartbeat, as itself, with its partition.
        answer = alive.beat()
        assert answer is not None
        assert (answer.member_id, answer.assignment) == (member_id, mine)

        def took_over() -> bool:
            assert alive.beat() is not None  # never fenced meanwhile
            assert alive.answer is not None
            assert alive.answer.member_id == member_id
            return len(alive.owned) == 2

        wait_until(took_over, 30, "the dead member's partition to move")
        # The dead member got one session from the restart: not less (counted from the launch,
        # since the process re-arms before it reports ready), and not 45 s.
        assert alive.last_heartbeat - launched >= SESSION_MS / 1000 - 0.2
        assert alive.last_heartbeat - restarted <= SESSION_MS / 1000 + 2.5


def test_a_shutdown_longer_than_a_session_expires_no_member(
    broker: ServiceProcess, coordinator: ServiceProcess
) -> None:
    """SIGTERM while a request is in flight: uvicorn stops accepting connections at once but
    waits for that request (up to its 5 s grace), longer than these members' 1.5 s sessions.
    Their heartbeats are refused meanwhile; the process expires no one for it."""
    with CoordinatorClient(coordinator.url) as client:
        members = two_members(broker, client, session_ms=1_500)
        before = {m.answer.member_id for m in members if m.answer is not None}
        assert len(before) == 2
        process = coordinator.process
        assert process is not None
        with socket.create_connection(("127.0.0.1", coordinator.port)) as held:
            # Headers of a request whose body never comes: it stays in flight.
            held.sendall(
                b"POST /groups/held/heartbeat HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            time.sleep(0.3)
            stopping = time.monotonic()
            process.send_signal(signal.SIGTERM)
            while process.poll() is None and time.monotonic() - stopping < 20:
                for member in members:
                    member.beat()  # answered until the drain ends, then refused
                time.sleep(0.1)
            took = time.monotonic() - stopping
        assert process.poll() is not None
        assert took > 3.0  # the shutdown outlasted the sessions by far
        coordinator.start()
        for member in members:
            answer = member.beat()
            assert answer is not None
            assert answer.member_id in before  # itself, not a new member after an expiry
        assert {m.answer.member_id for m in members if m.answer is not None} == before
