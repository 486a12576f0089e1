"""The controller killed (kill -9) and stopped past its lease (SIGSTOP, then SIGCONT) under
replicated acks=all load (RF=3, min.insync.replicas=2): another broker takes the controller over,
and nothing acknowledged is lost."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    Cluster,
    Producer,
    Reader,
    acknowledge_more,
    check_after_healing,
    controller,
    create_topic,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = pytest.mark.e2e


def test_kill_9_of_the_controller_loses_no_acknowledged_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("ctlkill")
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer)
        load.start()
        reader = Reader(cluster, topic)
        reader.start()
        acknowledge_more(load, 30, 60, "acks before the kill")
        victim = controller(cluster)
        assert victim >= 0
        cluster.processes[victim].kill()
        wait_for(lambda: controller(cluster) not in (-1, victim), 30, "a new controller")
        acknowledge_more(load, 30, 60, "acks with the controller gone")
        cluster.start(victim)
        acknowledge_more(load, 10, 60, "acks after the restart")
        high_watermark = check_after_healing(cluster, topic, load, reader=reader)
    finally:
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)


def test_a_controller_stopped_past_its_lease_loses_no_acknowledged_record(
    tmp_path: Path, postgres_url: str
) -> None:
    # PostgreSQL, not SQLite: a process stopped inside a SQLite write transaction would hold
    # every other broker's metadata writes (docs/cluster.md).
    cluster = Cluster(tmp_path, postgres_url)
    topic = unique("ctlstop")
    stopped = -1
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer, timeout_s=2)
        load.start()
        reader = Reader(cluster, topic)
        reader.start()
        acknowledge_more(load, 30, 60, "acks before the stop")
        victim = controller(cluster)
        assert victim >= 0
        process = cluster.processes[victim].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        stopped = victim
        wait_for(lambda: controller(cluster) not in (-1, victim), 30, "a new controller")
        acknowledge_more(load, 30, 60, "acks with the controller stopped")
        process.send_signal(signal.SIGCONT)
        stopped = -1
        acknowledge_more(load, 10, 60, "acks after the resume")
        high_watermark = check_after_healing(cluster, topic, load, reader=reader)
    finally:
        if stopped >= 0:
            process = cluster.processes[stopped].process
            if process is not None:
                process.send_signal(signal.SIGCONT)
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
