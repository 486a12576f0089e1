"""The SDK through a Redis outage under a coordinator process: a member's commit is retried while
the coordinator answers 503 50311, and lands once Redis is back; a consumer reading where to start
waits for the committed offset the same way -- no restart of anything."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater import AdminClient, Consumer, Producer
from headwater.groups.client import CoordinatorClient
from headwater.groups.consumer_group import ConsumerGroup
from headwater.groups.membership import GroupMembership
from headwater.topic_partition import TopicPartition
from headwater.types import PartitionId
from tests.integration.coordinator.redis_process import RedisProcess
from tests.support import ServiceProcess, free_port, unique
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[tuple[ServiceProcess, ServiceProcess, RedisProcess]]:
    port, data = free_port(), str(tmp_path / "broker")
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": data, "BROKER_FSYNC": "never"}
    with ServiceProcess("headwater_broker", port, env, tmp_path / "broker.log") as broker:
        store = RedisProcess(tmp_path / "redis").start()
        port = free_port()
        env = {
            "COORDINATOR_PORT": str(port),
            "COORDINATOR_BROKERS": broker.url,
            "COORDINATOR_REDIS_URL": store.url,
            "COORDINATOR_HEARTBEAT_INTERVAL_MS": "200",
        }
        try:
            with ServiceProcess("headwater_coordinator", port, env, tmp_path / "c.log") as coord:
                yield broker, coord, store
        finally:
            store.stop()


def _five_records(broker: ServiceProcess) -> TopicPartition:
    """Partition 0 of a new one-partition topic holding five records."""
    topic = unique("t")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        for i in range(5):
            producer.produce(topic, b"%d" % i, partition=0)
        producer.flush(30)
    return TopicPartition(topic, PartitionId(0))


def test_a_commit_is_retried_through_a_redis_outage(
    platform: tuple[ServiceProcess, ServiceProcess, RedisProcess],
) -> None:
    broker, coordinator, store = platform
    tp, group = _five_records(broker), unique("g")
    with CoordinatorClient(coordinator.url) as client:
        member = GroupMembership(client, group, [tp.topic], session_timeout_ms=10_000)
        member.start()
        try:
            wait_until(lambda: tp in member.take_assignment().partitions, 20, "the partition")
            member.report_owned({tp})
            store.stop()
            back = threading.Timer(1.5, store.start)
            back.start()
            try:
                member.commit({tp: 3}, timeout_s=20)
            finally:
                back.join()
            assert client.committed(group) == {tp: 3}
        finally:
            member.leave()


def test_a_committed_offset_is_waited_for_through_a_redis_outage(
    platform: tuple[ServiceProcess, ServiceProcess, RedisProcess],
) -> None:
    """Where an assigned partition starts is read from the coordinator: while it answers 503
    50311 the consumer waits (up to request.timeout.ms) instead of failing or guessing."""
    broker, coordinator, store = platform
    tp, group = _five_records(broker), unique("g")
    with CoordinatorClient(coordinator.url) as client:
        client.commit(group, {tp: 3})
    config = {
        "bootstrap.servers": broker.url,
        "group.id": group,
        "coordinator.url": coordinator.url,
        "request.timeout.ms": 20_000,
    }
    with Consumer(config) as consumer:
        view = ConsumerGroup(consumer, consumer.config)
        store.stop()
        back = threading.Timer(1.5, store.start)
        back.start()
        try:
            assert view.initial_position(tp) == 3
        finally:
            back.join()
            view.close()
