"""A broker and a coordinator process on loopback ports, for end-to-end tests of consumer groups."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from headwater import AdminClient, Producer
from tests.conftest import REDIS_URL, require
from tests.support import ServiceProcess, free_port, unique


@dataclass
class Platform:
    broker: ServiceProcess
    coordinator: ServiceProcess

    def make_topic(self, prefix: str, partitions: int, records: int) -> str:
        """A new topic holding ``records`` values ``b"0"``, ``b"1"``... round-robin over its
        partitions."""
        topic = unique(prefix)
        with AdminClient({"bootstrap.servers": self.broker.url}) as admin:
            admin.create_topic(topic, partitions)
        with Producer({"bootstrap.servers": self.broker.url}) as producer:
            for i in range(records):
                producer.produce(topic, b"%d" % i, partition=i % partitions)
            assert producer.flush(30) == 0
        return topic


@contextmanager
def start_platform(
    tmp: Path, key_prefix: str, heartbeat_interval_ms: int | None = None
) -> Iterator[Platform]:
    """A broker (fsync=never, data under ``tmp``) and a coordinator over it on the machine's
    Redis, under keys ``unique(key_prefix)`` that are deleted when both have stopped.
    ``heartbeat_interval_ms`` None leaves the coordinator's default."""
    import redis

    require("redis")
    prefix = unique(key_prefix) + ":"
    port, cport = free_port(), free_port()
    broker = ServiceProcess(
        "headwater_broker",
        port,
        {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(tmp / "b"), "BROKER_FSYNC": "never"},
        tmp / "broker.log",
    )
    env = {
        "COORDINATOR_PORT": str(cport),
        "COORDINATOR_REDIS_URL": REDIS_URL,
        "COORDINATOR_KEY_PREFIX": prefix,
        "COORDINATOR_BROKERS": f"http://127.0.0.1:{port}",
    }
    if heartbeat_interval_ms is not None:
        env["COORDINATOR_HEARTBEAT_INTERVAL_MS"] = str(heartbeat_interval_ms)
    coordinator = ServiceProcess("headwater_coordinator", cport, env, tmp / "coordinator.log")
    try:
        with broker, coordinator:
            yield Platform(broker, coordinator)
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
