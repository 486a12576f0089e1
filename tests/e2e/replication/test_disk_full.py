"""The data directory of a partition's leader fills up under replicated acks=all load (RF=3,
min.insync.replicas=2): the leader answers a clear storage error (500, 50003), takes its data
directory offline so the controller moves the leadership to an in-sync follower, and nothing
acknowledged is lost. Healing: free the space and restart that broker, as an operator would.

The leader's data directory is a 20 MiB tmpfs mounted for the test (root only; CI runs as root).
"""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    Cluster,
    Producer,
    Reader,
    acknowledge_more,
    check_after_healing,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("root")]

FULL = 0  # the broker whose disk fills; the preferred leader of the topic


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
    data_dir.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(data_dir)], check=True, timeout=30
    )
    try:
        try:
            start_three(cluster)
            created = httpx.post(
                f"{cluster.url(0)}/topics",
                json={
                    "name": topic,
                    "replica_assignment": [[FULL, 1, 2]],
                    "configs": {"min.insync.replicas": "2", "segment.bytes": "4000"},
                },
                timeout=10,
            )
            assert created.status_code == 201, created.text
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
            cluster.procs[FULL].kill()
            cluster.start(FULL)
            acknowledge_more(load, 10, 60, "acks after the restart")
            high_watermark = check_after_healing(cluster, topic, load, reader=reader)
        finally:
            cluster.stop_all()
        replicas_identical(tmp_path, topic, high_watermark)
    finally:
        subprocess.run(["umount", "-l", str(data_dir)], check=False, timeout=30)
