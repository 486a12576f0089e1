"""Coordinator processes: two behind "one service" never double-assign (SDK consumers with
callbacks, requests alternating between them), and the private redis-server path keeps state
across a restart and stops with the coordinator."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.groups.client import CoordinatorClient
from headwater.groups.errors import GroupNotFoundError
from headwater.types import PartitionId
from tests.support import ServiceProcess, free_port, unique
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ServiceProcess]:
    port = free_port()
    env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path / "broker"),
        "BROKER_FSYNC": "never",
    }
    with ServiceProcess("headwater_broker", port, env, tmp_path / "broker.log") as process:
        yield process


def coordinator(broker: ServiceProcess, tmp_path: Path, name: str, **env: str) -> ServiceProcess:
    port = free_port()
    base = {
        "COORDINATOR_PORT": str(port),
        "COORDINATOR_BROKERS": broker.url,
        "COORDINATOR_SESSION_TIMEOUT_MS": "2000",
        "COORDINATOR_HEARTBEAT_INTERVAL_MS": "200",
        "COORDINATOR_SWEEP_INTERVAL_MS": "100",
    }
    return ServiceProcess("headwater_coordinator", port, base | env, tmp_path / f"{name}.log")


class Ownership:
    """Who owns what, as the consumers' own rebalance callbacks say; flags any double owner."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []

    def assigned(self, name: str, partitions: list[TopicPartition]) -> None:
        with self.lock:
            for tp in partitions:
                if tp in self.owner:
                    self.violations.append(f"{tp} given to {name} while {self.owner[tp]} owns it")
                self.owner[tp] = name

    def revoked(self, name: str, partitions: list[TopicPartition]) -> None:
        with self.lock:
            for tp in partitions:
                if self.owner.get(tp) == name:
                    del self.owner[tp]


class Member(threading.Thread):
    def __init__(self, name: str, config: dict[str, object], topic: str, book: Ownership) -> None:
        super().__init__(daemon=True)
        self.name_ = name
        self.consumer = Consumer(config)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _consumer, ps: book.assigned(name, ps),
            on_revoke=lambda _consumer, ps: book.revoked(name, ps),
        )
        self.stopping = threading.Event()
        self.records = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            self.records += len(self.consumer.consume(500, 0.1))
        self.consumer.close()


def test_two_coordinators_behind_one_service_never_double_assign(
    broker: ServiceProcess, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    env = {"COORDINATOR_REDIS_URL": redis_url, "COORDINATOR_KEY_PREFIX": redis_prefix}
    a = coordinator(broker, tmp_path, "a", **env).start()
    b = coordinator(broker, tmp_path, "b", **env).start()
    topic, group = unique("events"), unique("g")
    members: list[Member] = []
    newcomers: list[Member] = []
    try:
        with AdminClient({"bootstrap.servers": broker.url}) as admin:
            admin.create_topic(topic, 12)
        with Producer({"bootstrap.servers": broker.url}) as producer:
            for i in range(600):
                producer.produce(topic, b"%d" % i, partition=i % 12)
            producer.flush(30)
        config: dict[str, object] = {
            "bootstrap.servers": broker.url,
            "group.id": group,
            "coordinator.url": f"{a.url},{b.url}",  # every request alternates between the two
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 100,
        }
        book = Ownership()
        members += [Member(f"m{i}", config, topic, book) for i in range(4)]
        for m in members:
            m.start()
        client = CoordinatorClient([a.url, b.url])

        def stable(n: int) -> bool:
            g = client.describe(group)
            return g["state"] == "Stable" and len(g["members"]) == n

        # The group exists once the first member's join lands: until then describe is a 404.
        not_yet = (GroupNotFoundError,)
        wait_until(lambda: stable(4), what="4 stable members", errors=not_yet)
        # Churn: two leave, three join, while both coordinators serve the group.
        for m in members[:2]:
            m.stopping.set()
        for m in members[:2]:
            m.join(timeout=20)
        newcomers += [Member(f"n{i}", config, topic, book) for i in range(3)]
        for m in newcomers:
            m.start()
        live = members[2:] + newcomers
        wait_until(lambda: stable(5), what="5 stable members")
        wait_until(lambda: client.lag(group)["total_lag"] == 0, what="everything committed")
        # The coordinator is stable once it has answered; each poll thread applies the answer
        # (and calls on_assign) on its next poll.
        wait_until(lambda: len(book.owner) == 12, timeout_s=5, what="every partition applied")
        with book.lock:
            owners = dict(book.owner)
        assert book.violations == []
        assert set(owners) == {TopicPartition(topic, PartitionId(p)) for p in range(12)}
        assert sorted(sum(1 for o in owners.values() if o == m.name_) for m in live) == [
            2,
            2,
            2,
            3,
            3,
        ]
        for m in live:
            m.stopping.set()
        for m in live:
            m.join(timeout=20)
        assert client.describe(group)["state"] == "Empty"
        assert book.violations == []
        client.close()
    finally:
        for m in [*members, *newcomers]:
            m.stopping.set()
        a.stop()
        b.stop()


def test_private_redis_keeps_state_across_restart_and_stops_with_it(
    broker: ServiceProcess, tmp_path: Path
) -> None:
    data = tmp_path / "coord"
    coord = coordinator(broker, tmp_path, "private", COORDINATOR_DATA_DIR=str(data))
    os.environ.pop("COORDINATOR_REDIS_URL", None)
    topic, group = unique("t"), unique("g")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        for i in range(5):
            producer.produce(topic, b"%d" % i, partition=0)
        producer.flush(30)
    with coord:
        with CoordinatorClient(coord.url) as client:
            client.commit(group, {TopicPartition(topic, PartitionId(0)): 4})
        assert (data / "redis.sock").exists()
        assert (data / "appendonlydir").is_dir()
    assert not (data / "redis.sock").exists()  # its redis-server stopped with it
    with coord, CoordinatorClient(coord.url) as client:
        assert client.committed(group) == {TopicPartition(topic, PartitionId(0)): 4}
    # Even a SIGKILLed coordinator takes its private redis-server with it (PR_SET_PDEATHSIG).
    coord.start()
    coord.kill()

    def redis_gone() -> bool:
        try:
            redis.Redis(unix_socket_path=str(data / "redis.sock"), socket_timeout=1).ping()
        except (redis.ConnectionError, FileNotFoundError):
            return True
        return False

    wait_until(redis_gone, timeout_s=10, what="private redis-server to exit")
