"""Reassign a partition to brokers that did not hold it while an SDK producer writes to it.

Three broker processes, a topic with one partition on brokers [0, 1] (RF=2,
min.insync.replicas=2) and an idempotent acks=all SDK producer writing continuously. A fourth
broker starts and ``headwater partitions reassign`` moves the partition to [2, 3]: no send
fails, the new replicas catch up and join the ISR, the replica list becomes [2, 3] with broker 2
leading, brokers 0 and 1 delete their copies, and every acknowledged record is stored once, in
order. Cancelling a move through the SDK's AdminClient (Kafka's reassignment calls) is the
second test.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater import AdminClient, Producer, TopicPartition
from headwater.errors import InvalidReplicaAssignmentError
from headwater.message import Message
from tests.e2e.replication.cluster import (
    Cluster,
    check_acknowledged,
    create_topic,
    read_values,
    start_three,
    wait_for,
)
from tests.support import free_port, unique

pytestmark = pytest.mark.e2e


class SdkLoad:
    """An SDK producer (idempotent, acks=all) sending unique values to partition 0 in a thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 50,
        }
        self.acknowledged: list[str] = []
        self.offsets: list[int] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: BaseException | None, msg: Message) -> None:
        value = bytes(msg.value() or b"").decode()
        if err is not None:
            self.failures.append(f"{value}: {err}")
        else:
            self.acknowledged.append(value)
            self.offsets.append(msg.offset())

    def _run(self) -> None:
        with Producer(self.config) as producer:
            for i in range(200_000):  # bounded; the test stops it long before
                if self._stop.is_set():
                    break
                producer.produce(
                    self.topic, f"v{i}".encode(), partition=0, on_delivery=self._report
                )
                producer.poll(0)
                time.sleep(0.002)
            producer.flush(180)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=240)
        assert not self._thread.is_alive(), "the producer did not stop"


def reassignment(cluster: Cluster, broker_id: int, topic: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{cluster.url(broker_id)}/topics/{topic}/partitions/0/reassignment", timeout=5
    )
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()
    return state


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "headwater_cli", *args], capture_output=True, timeout=240
    )


def isr(cluster: Cluster, topic: str) -> list[int]:
    described = cluster.describe(topic)
    members = [] if described is None else described["isr"]
    assert isinstance(members, list)
    return sorted(members)


def test_a_partition_moves_to_new_brokers_under_load(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.ports[3] = free_port()
    topic = unique("move")
    load: SdkLoad | None = None
    try:
        start_three(cluster)
        create_topic(cluster, topic, replica_assignment=[[0, 1]], via=1)
        wait_for(lambda: isr(cluster, topic) == [0, 1], 60, "ISR [0, 1]")

        bootstrap = ",".join(cluster.url(b) for b in range(3))
        load = SdkLoad(bootstrap, topic)
        load.start()
        wait_for(lambda: len(load.acknowledged) >= 200, 60, "acks before the move")

        # A broker not yet registered is refused (42206) with nothing changed.
        before = reassignment(cluster, 2, topic)
        refused = httpx.post(
            f"{cluster.url(2)}/topics/{topic}/partitions/0/reassignment",
            json={"replicas": [2, 3]},
            timeout=30,
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error_code"] == 42206
        assert reassignment(cluster, 2, topic) == before

        cluster.start(3)

        def four_active() -> bool:
            brokers = httpx.get(f"{cluster.url(0)}/cluster", timeout=5).json()["brokers"]
            return sum(1 for b in brokers if b["state"] == "active") == 4

        wait_for(four_active, 60, "the fourth broker active")
        # Asked of a broker that is not the controller: the request is relayed to it.
        controller = httpx.get(f"{cluster.url(0)}/cluster", timeout=5).json()["controller"]
        relay = next(b for b in (2, 1, 0) if b != controller["broker_id"])
        moved = cli(
            "partitions",
            "reassign",
            topic,
            "0",
            "--replicas",
            "2,3",
            "--wait",
            "--wait-timeout",
            "120",
            "--bootstrap-server",
            cluster.url(relay),
        )
        assert moved.returncode == 0, moved.stderr.decode()
        printed = moved.stdout.decode()
        assert "adding=2,3 removing=0,1" in printed, printed  # the move started
        assert printed.rstrip().splitlines()[-3].endswith("none in progress"), printed

        def completed() -> bool:
            state = reassignment(cluster, 0, topic)
            return not state["in_progress"] and state["replicas"] == [2, 3]

        wait_for(completed, 120, "the move to complete")
        wait_for(lambda: reassignment(cluster, 3, topic)["replicas"] == [2, 3], 30, "broker 3")
        done = reassignment(cluster, 3, topic)
        assert sorted(done["isr"]) == [2, 3]
        assert done["leader"] == 2  # the preferred leader, the first target
        shown = cli("partitions", "reassignment", topic, "0", "--bootstrap-server", cluster.url(0))
        assert shown.returncode == 0, shown.stderr.decode()
        assert b"none in progress" in shown.stdout

        def copies_deleted() -> bool:
            return not any((tmp_path / f"broker-{b}" / f"{topic}-0").exists() for b in (0, 1))

        wait_for(copies_deleted, 60, "brokers 0 and 1 to delete their copies")
        target = len(load.acknowledged) + 200
        wait_for(lambda: len(load.acknowledged) >= target, 60, "acks after the move")
        load.stop()
        assert not load.failures, load.failures[:5]
        last = max(load.offsets)
        wait_for(
            lambda: cluster.high_watermark(topic) > last,
            60,
            "the high watermark past every acknowledged offset",
        )
        values, _ = read_values(cluster, topic, last + 1, url=cluster.url(2))
        check_acknowledged(values, load.acknowledged)
        assert all((tmp_path / f"broker-{b}" / f"{topic}-0").is_dir() for b in (2, 3))
    finally:
        if load is not None:
            load._stop.set()
        cluster.stop_all()


def test_reassigning_back_cancels_a_move_and_the_added_replica_deletes_its_copy(
    tmp_path: Path,
) -> None:
    """A move from [0] to [1, 2] with broker 2 down, through the SDK's AdminClient: broker 1
    catches up and joins the ISR, the move waits for broker 2 (broker 1, the first target, leads
    meanwhile); cancelling it (``None``, Kafka's ``Optional.empty()``) reassigns back to [0]:
    broker 0 leads again with every record and broker 1 deletes its copy."""
    cluster = Cluster(tmp_path)
    topic = unique("back")
    tp = TopicPartition(topic, 0)
    try:
        start_three(cluster)
        created = httpx.post(
            f"{cluster.url(0)}/topics",
            json={"name": topic, "replica_assignment": [[0]]},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        wait_for(lambda: cluster.leader(topic) == 0, 60, "broker 0 leading")
        with Producer({"bootstrap.servers": cluster.url(1), "acks": "all"}) as producer:
            for i in range(300):
                producer.produce(topic, f"r{i}".encode(), partition=0)
            assert producer.flush(60) == 0
        cluster.processes[2].kill()
        with AdminClient({"bootstrap.servers": cluster.url(1)}) as admin:
            (before,) = admin.list_partition_reassignments([tp]).values()
            assert (before.in_progress, before.replicas, before.leader) == (False, (0,), 0)
            # Nothing moves: a cancel sends nothing, an unknown broker is refused.
            assert admin.alter_partition_reassignments({tp: None}) == {tp: before}
            with pytest.raises(InvalidReplicaAssignmentError, match=r"Brokers \[7\]"):
                admin.alter_partition_reassignments({tp: [0, 7]})
            assert admin.list_partition_reassignments([tp]) == {tp: before}

            started = admin.alter_partition_reassignments({tp: [1, 2]})[tp]
            assert started.in_progress
            assert (started.adding_replicas, started.removing_replicas) == ((1, 2), (0,))
            assert started.target_replicas == (1, 2)
            copy = tmp_path / "broker-1" / f"{topic}-0"
            wait_for(lambda: reassignment(cluster, 0, topic)["leader"] == 1, 60, "broker 1 leads")
            assert copy.is_dir()
            moving = admin.list_partition_reassignments([tp])[tp]
            assert moving.in_progress  # broker 2 is not in sync
            assert (moving.replicas, moving.isr) == ((1, 2, 0), (1, 0))
            assert moving.original_replicas == (0,)

            state = admin.alter_partition_reassignments({tp: None})[tp]
        assert (state.in_progress, state.replicas, state.isr) == (False, (0,), (0,))
        # Broker 1, the first target, took leadership once in sync; the cancel gives it back.
        assert (state.leader, state.leader_epoch) == (0, before.leader_epoch + 2)
        wait_for(lambda: not copy.exists(), 60, "broker 1 to delete its copy")
        values, _ = read_values(cluster, topic, 300, url=cluster.url(0))
        assert values == [f"r{i}" for i in range(300)]
    finally:
        cluster.stop_all()
