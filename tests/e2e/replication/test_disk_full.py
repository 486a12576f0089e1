"""A broker's data directory fills up under replicated acks=all load (RF=3,
min.insync.replicas=2), and nothing acknowledged is lost.

- The leader's: it answers a clear storage error (500, 50003), takes its data directory offline
  so the controller moves the leadership to an in-sync follower.
- A follower's: its failed copy takes its data directory offline too, so it stops heartbeating,
  reports itself not ready and is fenced, which drops it from the ISR at the session timeout
  rather than by lag; the leader goes on acknowledging with the other follower.

Healing: free the space and restart that broker, as an operator would. The full broker's data
directory is a 20 MiB tmpfs mounted for the test (root only; CI runs as root).
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    Cluster,
    Producer,
    Reader,
    acknowledge_more,
    check_after_healing,
    create_topic,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("root")]

FULL = 0  # the broker whose disk fills; the preferred leader of the topic
FOLLOWER = 1  # the follower whose disk fills in the second test


@contextlib.contextmanager
def tmpfs(directory: Path) -> Iterator[None]:
    """A 20 MiB tmpfs mounted on ``directory`` while the block runs."""
    directory.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(directory)], check=True, timeout=30
    )
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, timeout=30)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem has no byte left."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * size
            try:
                while True:
                    out.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return filler


def test_a_full_disk_moves_the_leadership_and_loses_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("full")
    data_dir = tmp_path / f"broker-{FULL}"
    with tmpfs(data_dir):
        try:
            start_three(cluster)
            create_topic(cluster, topic, replica_assignment=[[FULL, 1, 2]])
            wait_for(lambda: cluster.leader(topic) == FULL, 30, f"broker {FULL} leading")
            producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
            load = Producer(cluster, topic, producer, retry_storage_errors=True)
            load.start()
            reader = Reader(cluster, topic)
            reader.start()
            acknowledge_more(load, 30, 60, "acks before the disk fills")
            filler = fill(data_dir)
            wait_for(lambda: cluster.leader(topic) not in (-1, FULL), 30, "a new leader")
            acknowledge_more(load, 30, 60, "acks by the new leader")
            assert (FULL, 50003) in load.storage_errors, load.storage_errors
            assert {code for _b, code in load.storage_errors} == {50003}
            # Heal: free the space, restart the broker; it rejoins as a follower and catches up.
            filler.unlink()
            cluster.processes[FULL].kill()
            cluster.start(FULL)
            acknowledge_more(load, 10, 60, "acks after the restart")
            high_watermark = check_after_healing(cluster, topic, load, reader=reader)
        finally:
            cluster.stop_all()
        replicas_identical(tmp_path, topic, high_watermark)


def broker_state(cluster: Cluster, asked: int, broker_id: int) -> str:
    brokers = httpx.get(f"{cluster.url(asked)}/cluster", timeout=5).json()["brokers"]
    state: str = next(b["state"] for b in brokers if b["broker_id"] == broker_id)
    return state


def isr(cluster: Cluster, topic: str) -> list[int]:
    described = cluster.describe(topic)
    members = [] if described is None else described["isr"]
    assert isinstance(members, list)
    return sorted(members)


def test_a_full_follower_disk_takes_the_follower_offline_and_loses_nothing(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("full-follower")
    data_dir = tmp_path / f"broker-{FOLLOWER}"
    with tmpfs(data_dir):
        try:
            start_three(cluster)
            create_topic(cluster, topic, replica_assignment=[[0, FOLLOWER, 2]])
            wait_for(lambda: isr(cluster, topic) == [0, 1, 2], 30, "every replica in sync")
            producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
            load = Producer(cluster, topic, producer)
            load.start()
            reader = Reader(cluster, topic)
            reader.start()
            acknowledge_more(load, 30, 60, "acks before the disk fills")
            filler = fill(data_dir)
            # Fenced, not merely lagging: it stopped heartbeating after its failed copy. (Only
            # by lag it would stay active and leave the ISR after replica.lag.time.max.ms.)
            wait_for(lambda: broker_state(cluster, 0, FOLLOWER) == "fenced", 30, "fenced")
            ready = httpx.get(f"{cluster.url(FOLLOWER)}/readyz", timeout=5)
            assert ready.status_code == 503, ready.text
            assert ready.json()["storage_offline"] is True
            wait_for(lambda: isr(cluster, topic) == [0, 2], 30, f"broker {FOLLOWER} out of the ISR")
            log = (tmp_path / f"broker-{FOLLOWER}.log").read_text()
            assert "takes its data directory offline" in log
            acknowledge_more(load, 30, 60, "acks with the follower offline")
            assert cluster.leader(topic) == 0
            assert load.storage_errors == []  # the leader's disk is fine: producers see nothing
            # Heal: free the space, restart the broker; it catches up and rejoins the ISR.
            filler.unlink()
            cluster.processes[FOLLOWER].kill()
            cluster.start(FOLLOWER)
            acknowledge_more(load, 10, 60, "acks after the restart")
            high_watermark = check_after_healing(cluster, topic, load, reader=reader)
            assert httpx.get(f"{cluster.url(FOLLOWER)}/readyz", timeout=5).status_code == 200
        finally:
            cluster.stop_all()
        replicas_identical(tmp_path, topic, high_watermark)
