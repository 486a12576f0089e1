"""The SDK against a real three-broker cluster: each partition's requests go to its leader.

Three broker processes share one SQLite metadata file (``BROKER_METADATA_URL``), each with its
own port and data directory; the module's tests share them, each with topics of its own. Topics
are created with one replica per partition, so leaders are spread over the brokers and a
partition whose broker is down has no leader until it returns.

* a producer and a consumer whose ``bootstrap.servers`` lists one broker only (not the leader of
  partition 0) write and read every partition, each at its leader;
* a broker killed with SIGKILL while a producer and a consumer run, then started again: the
  clients meet connection errors and 503 50302, retry, and every acknowledged record is in the
  log exactly once, in order;
* a topic deleted and created again on another broker: the next request meets the old leader's
  421 and goes to the new one (after a metadata refresh: the new topic's leader epoch is not
  newer than the old topic's, so the 421's leader alone is not trusted);
* the AdminClient and the Spark source's topic log, bootstrapped from one broker, reach every
  partition;
* the coordinator, given one broker, reads the offsets of partitions led elsewhere; while one has
  no leader, lag leaves it out and a reset is refused with 503 50302, until it returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.client.cluster import ClusterClient
from headwater.errors import NotLeaderOrFollowerError
from headwater.groups.client import CoordinatorClient
from headwater.groups.errors import BrokersUnavailableError
from headwater.message import Message
from headwater.records.batch import encode_batch
from headwater.types import Offset, PartitionId
from headwater_broker.settings import BrokerSettings
from tests.support import ServiceProcess, free_port, unique
from tests.support.cluster import BrokerCluster
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        "metadata_url" not in BrokerSettings.model_fields,
        reason="the brokers of this tree do not form a cluster (no BROKER_METADATA_URL)",
    ),
]

BROKERS = 3


class Cluster(BrokerCluster):
    """The module's brokers, with the partition leaders as one of them describes a topic."""

    def leaders(self, topic: str, via: int = 0) -> dict[int, int]:
        """Partition -> leader broker id, as broker ``via`` describes ``topic`` ({} while it
        does not know the topic: between a delete and a create of the same name, say)."""
        answer = httpx.get(f"{self.url(via)}/topics/{topic}", timeout=10)
        if answer.status_code == 404:
            return {}
        answer.raise_for_status()
        return {p["partition"]: p["leader"] for p in answer.json()["partitions"]}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("cluster"), BROKERS)
    try:
        started.start_all(timeout_s=30)
        yield started
    finally:
        started.stop_all()


@pytest.fixture
def cluster(running: Cluster) -> Cluster:
    """The module's cluster (each test uses topics of its own), every broker running and active:
    a test that killed one has started it again, and it has registered before the next test."""
    for broker_id, process in running.processes.items():
        if not process.running():
            running.restart(broker_id)
    wait_until(lambda: len(running.active()) == BROKERS, 30, "every broker active")
    return running


def spread_topic(cluster: Cluster, partitions: int) -> tuple[str, dict[int, int]]:
    """A topic of one replica per partition, placed round-robin on the brokers; its leaders."""
    topic = unique("routed")
    assignment = [[p % BROKERS] for p in range(partitions)]
    with httpx.Client(base_url=cluster.url(0), timeout=30) as client:
        answer = client.post(
            "/topics",
            json={"name": topic, "partitions": partitions, "replica_assignment": assignment},
        )
        assert answer.status_code == 201, answer.text
    expected = {p: p % BROKERS for p in range(partitions)}
    for via in range(BROKERS):  # every broker's metadata has caught up
        wait_until(partial(_leaders_are, cluster, topic, via, expected), 10, f"leaders at {via}")
    return topic, expected


def _leaders_are(cluster: Cluster, topic: str, via: int, expected: dict[int, int]) -> bool:
    return cluster.leaders(topic, via) == expected


def read_everything(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60
) -> list[Message]:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    got: list[Message] = []
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, PartitionId(p)) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(consumer.consume(500, 1.0))
        got.extend(consumer.consume(500, 0.5))  # nothing more may come
    return got


def test_fast_paths_answer_421_naming_the_leader(cluster: Cluster) -> None:
    topic, leaders = spread_topic(cluster, 3)
    elsewhere = (leaders[0] + 1) % BROKERS
    body = encode_batch([(None, b"x", [])])
    with httpx.Client(base_url=cluster.url(elsewhere), timeout=10) as client:
        answer = client.post(
            f"/topics/{topic}/partitions/0/batches",
            content=body,
            headers={"Content-Type": "application/vnd.headwater.batches"},
        )
    assert answer.status_code == 421, answer.text
    assert answer.json()["leader_url"] == cluster.url(leaders[0])
    with ClusterClient([cluster.url(elsewhere)]) as routed:
        with pytest.raises(NotLeaderOrFollowerError) as raised:
            routed.broker(cluster.url(elsewhere)).produce_batches(topic, 0, body)
        assert raised.value.leader_id == leaders[0]
        assert raised.value.leader_url == cluster.url(leaders[0])
        assert routed.leader(topic, 0).base_url == cluster.url(leaders[0])


def test_producer_and_consumer_reach_every_leader_from_one_bootstrap_broker(
    cluster: Cluster,
) -> None:
    partitions = 6
    topic, leaders = spread_topic(cluster, partitions)
    assert set(leaders.values()) == set(range(BROKERS))
    bootstrap = cluster.url((leaders[0] + 1) % BROKERS)  # not partition 0's leader
    config = {"bootstrap.servers": bootstrap, "linger.ms": 2}
    with Producer(config) as producer:
        futures = [
            producer.produce(topic, b"v-%d" % i, key=b"k-%d" % i, partition=i % partitions)
            for i in range(600)
        ]
        assert producer.flush(60) == 0
    offsets = [f.result(0) for f in futures]
    assert {m.partition for m in offsets} == set(range(partitions))
    got = read_everything(bootstrap, topic, partitions, 600)
    assert sorted(r.value() or b"" for r in got) == sorted(b"v-%d" % i for i in range(600))
    for p in range(partitions):
        mine = [r for r in got if r.partition() == p]
        assert [r.offset() for r in mine] == list(range(100))
        assert [r.value() for r in mine] == [b"v-%d" % i for i in range(p, 600, partitions)]
    # Each partition's log is on its leader alone: the data really went to the leaders.
    for p, leader in leaders.items():
        with httpx.Client(base_url=cluster.url(leader), timeout=10) as client:
            answer = client.get(f"/topics/{topic}/partitions/{p}/offsets")
        assert answer.json()["end_offset"] == 100


def test_admin_and_topic_log_from_one_bootstrap_broker(cluster: Cluster) -> None:
    pa = pytest.importorskip("pyarrow")
    from headwater_spark.topic_log import TopicLog

    topic, leaders = spread_topic(cluster, 3)
    bootstrap = cluster.url(2)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(30):
            producer.produce(topic, b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        described = admin.describe_cluster()
        assert described is not None
        assert sorted(b.broker_id for b in described.brokers) == [0, 1, 2]
        assert {p.partition: p.leader for p in admin.describe_topic(topic).partitions} == leaders
        for p in range(3):
            assert admin.offsets(topic, p).end_offset == 10
    with TopicLog([bootstrap]) as log:
        ranges = log.log_ranges([topic])
        assert ranges == {(topic, PartitionId(p)): (0, 10) for p in range(3)}
        for p in range(3):
            batches = list(log.read_range(topic, PartitionId(p), Offset(0), Offset(10), 100))
            values = pa.concat_arrays([b.column(1) for b in batches]).to_pylist()
            assert values == [b"%d" % i for i in range(p, 30, 3)]


def test_a_moved_leader_is_followed_after_its_421(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique("moved")
    bootstrap = cluster.url(0)
    with httpx.Client(base_url=bootstrap, timeout=30) as client:
        created = client.post("/topics", json={"name": topic, "replica_assignment": [[1]]})
        assert created.status_code == 201, created.text
    wait_until(lambda: cluster.leaders(topic, 0) == {0: 1}, 10, "leader 1")
    # Not idempotent: a topic made again starts without this producer's sequences.
    with Producer({"bootstrap.servers": bootstrap, "acks": 1}) as producer:
        assert producer.produce(topic, b"before").result(30).offset == 0
        with httpx.Client(base_url=bootstrap, timeout=30) as client:
            assert client.delete(f"/topics/{topic}").status_code == 204
            wait_until(
                lambda: (
                    client.post(
                        "/topics", json={"name": topic, "replica_assignment": [[2]]}
                    ).status_code
                    == 201
                ),
                10,
                "the name free again",
            )
        # Broker 1, which the producer still takes for the leader, knows who leads now.
        wait_until(lambda: cluster.leaders(topic, 1) == {0: 2}, 10, "broker 1 sees leader 2")
        with caplog.at_level(logging.DEBUG, logger="headwater.producer"):
            assert producer.produce(topic, b"after").result(30).offset == 0
    # The first attempt went to broker 1 and was refused there; the retry reached broker 2.
    retries = [r.getMessage() for r in caplog.records if "retrying batch" in r.getMessage()]
    assert retries, "the batch was not retried"
    assert "NotLeaderOrFollowerError" in retries[0], retries
    got = read_everything(cluster.url(1), topic, 1, 1)
    assert [r.value() for r in got] == [b"after"]


def test_kill_9_of_a_leader_loses_no_acknowledged_record(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="headwater.producer")
    caplog.set_level(logging.DEBUG, logger="headwater.consumer")
    partitions = 3
    topic, leaders = spread_topic(cluster, partitions)
    victim = leaders[1]
    survivor = leaders[0]
    bootstrap = cluster.url(survivor)
    acknowledged: list[bytes] = []
    failed: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def delivered(error: BaseException | None, metadata: Any) -> None:
        with lock:
            if error is not None:
                failed.append(error)

    producer_config = {
        "bootstrap.servers": bootstrap,
        "delivery.timeout.ms": 90_000,
        "request.timeout.ms": 5_000,
        "linger.ms": 5,
    }
    consumed: list[Message] = []
    consumer_errors: list[BaseException] = []

    def consume() -> None:
        config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
        try:
            with Consumer(config) as consumer:
                consumer.assign([TopicPartition(topic, PartitionId(p)) for p in range(partitions)])
                while not stop.is_set():
                    consumed.extend(consumer.consume(500, 0.5))
        except BaseException as exc:  # reported by the test below
            consumer_errors.append(exc)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    with Producer(producer_config) as producer:
        futures = []
        for i in range(3000):  # bounded: about 3 s of producing at this pace
            value = b"%06d" % i
            future = producer.produce(topic, value, partition=i % partitions, on_delivery=delivered)
            futures.append((value, future))
            if i == 600:
                cluster.processes[victim].kill()
            if i == 1800:
                time.sleep(2.0)  # past the session timeout: the id is free to register again
                cluster.restart(victim)
            time.sleep(0.001)
        assert producer.flush(120) == 0
    for value, future in futures:
        if future.exception(0) is None:
            acknowledged.append(value)
    assert not failed, failed[:3]
    assert len(acknowledged) == 3000
    # The clients did meet the dead broker: refused connections, then "no leader" (503 50302).
    met = " ".join(r.getMessage() for r in caplog.records)
    assert "ConnectError" in met or "LeaderNotAvailableError" in met, met[-2000:]

    def caught_up() -> bool:
        return len(consumed) >= len(acknowledged)

    try:
        wait_until(caught_up, 60, "the consumer to read every acknowledged record")
    finally:
        stop.set()
        reader.join(30)
    assert not consumer_errors, consumer_errors
    assert sorted(r.value() or b"" for r in consumed) == sorted(acknowledged)
    # And the logs hold each record once, in produce order per partition.
    logged = read_everything(cluster.url(victim), topic, partitions, 3000)
    assert sorted(r.value() or b"" for r in logged) == sorted(acknowledged)
    for p in range(partitions):
        values = [r.value() for r in logged if r.partition() == p]
        assert values == [b"%06d" % i for i in range(p, 3000, partitions)]


def test_coordinator_answers_for_a_partition_without_a_leader(
    cluster: Cluster, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    """The coordinator knows one broker; a partition led by another is read from its leader,
    and while it has no leader lag leaves it out and a reset is refused as retriable."""
    topic, leaders = spread_topic(cluster, 3)
    with Producer({"bootstrap.servers": cluster.url(0)}) as producer:
        for i in range(30):
            producer.produce(topic, b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
    port = free_port()
    env = {
        "COORDINATOR_PORT": str(port),
        "COORDINATOR_BROKERS": cluster.url(0),
        "COORDINATOR_REDIS_URL": redis_url,
        "COORDINATOR_KEY_PREFIX": redis_prefix,
        "COORDINATOR_LAG_METRICS_INTERVAL_MS": "0",
    }
    group = unique("g")
    tps = [TopicPartition(topic, PartitionId(p)) for p in range(3)]
    victim = leaders[1]
    assert victim != 0
    with (
        ServiceProcess("headwater_coordinator", port, env, tmp_path / "coordinator.log"),
        CoordinatorClient(f"http://127.0.0.1:{port}") as client,
    ):
        client.commit(group, dict.fromkeys(tps, 4))
        lag = client.lag(group)
        assert {(r["partition"], r["end_offset"]) for r in lag["partitions"]} == {
            (0, 10),
            (1, 10),
            (2, 10),
        }
        assert lag["total_lag"] == 18
        cluster.processes[victim].kill()
        wait_until(lambda: cluster.leaders(topic, 0)[1] == -1, 30, "partition 1 without leader")
        lag = client.lag(group)
        assert sorted(r["partition"] for r in lag["partitions"]) == [0, 2]
        with pytest.raises(BrokersUnavailableError):
            client.reset(group, {"strategy": "latest", "topics": [topic]})
        assert client.committed(group) == dict.fromkeys(tps, 4)  # nothing changed
        cluster.restart(victim)
        wait_until(lambda: cluster.leaders(topic, 0)[1] == victim, 30, "partition 1 led again")
        client.reset(group, {"strategy": "latest", "topics": [topic]})
        assert client.committed(group) == dict.fromkeys(tps, 10)
