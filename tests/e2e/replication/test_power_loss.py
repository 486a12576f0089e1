"""Every broker loses power at once (RF=3, min.insync.replicas=2, acks=all): with
``BROKER_FSYNC=always`` no acknowledged record is lost; with ``never`` acknowledged records are.

``kill -9`` keeps the kernel's page cache, so it cannot stage a power loss. Here each broker's data
directory is a mount of tests/support/lazyfs.py, which keeps written data in its own memory until
the file is fsynced, and forgets a new file or directory unless its directory was fsynced. The
power loss kills every broker (kill -9), then every lazyfs process (kill -9: the unsynced data
dies with it) and detaches the mounts. Mounted again over what survived, the brokers restart,
elect leaders and recover their logs.

The metadata store (the cluster's SQLite file, standing in for PostgreSQL) is not on a lazy disk:
its durability is the database's (``synchronous=FULL``), not the broker's. lazyfs applies
removals and renames of durable names at once, so a crash never undoes those (its module
docstring says what it models)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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
    read_values,
    replicas_identical,
    wait_all_active,
    wait_for,
)
from tests.support import unique
from tests.support.lazyfs import LazyMount

pytestmark = [pytest.mark.e2e, pytest.mark.needs("root", "fuse")]

POWER_LOSSES = 2  # in a row under `always`: the epochs the first restart wrote must survive


def lazy_disks(cluster: Cluster) -> list[LazyMount]:
    """One lazyfs per broker, to mount where ``Cluster`` puts the broker's data directory."""
    root = cluster.root
    return [
        LazyMount(root / f"disk-{b}", root / f"broker-{b}", root / f"lazyfs-{b}.log")
        for b in range(3)
    ]


def power_loss(cluster: Cluster, disks: list[LazyMount]) -> None:
    """Every broker and every disk at once.

    The brokers die first, so that none sees its disk fail and acts on it (a broker that lost
    its disk would take it offline in the metadata store, which survives); what they wrote stays
    in lazyfs's memory until the disks die too, which is the same as dying together."""
    for proc in cluster.processes.values():
        proc.kill()
    for disk in disks:
        disk.crash()


def power_on(cluster: Cluster, disks: list[LazyMount], fsync: str) -> None:
    """Mount every disk again over what survived and start the three brokers."""
    for disk in disks:
        disk.mount()
    # Side by side: most of a broker's start is its interpreter importing, seconds on a busy box.
    with ThreadPoolExecutor(max_workers=3) as pool:
        started = pool.map(lambda b: cluster.start(b, BROKER_FSYNC=fsync), range(3))
        list(started)  # re-raises a start that failed
    wait_all_active(cluster)


def first_leader(cluster: Cluster, topic: str, old_leader: int) -> int:
    """The broker leading the partition after a power loss, while ``old_leader`` is still down:
    a former follower, or ``old_leader`` itself when the ISR is left with it alone (the partition
    then waits for it, as Kafka's); -1 while the controller has not settled either way."""
    described = cluster.describe(topic) or {}
    leader, isr = described.get("leader", -1), described.get("isr")
    if isr == [old_leader]:
        return old_leader
    return leader if isinstance(leader, int) and leader != old_leader else -1


def test_power_loss_under_fsync_always_loses_no_acknowledged_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("power")
    disks = lazy_disks(cluster)
    try:
        try:
            power_on(cluster, disks, "always")
            # 4000-byte segments: the power goes with segments rolled, indexes, producer
            # snapshots and checkpoints written, and an active segment part full.
            create_topic(cluster, topic)
            producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
            load = Producer(cluster, topic, producer)
            load.start()
            reader = Reader(cluster, topic)
            reader.start()
            for cut in range(POWER_LOSSES):
                acknowledge_more(load, 30, 60, f"acks before power loss {cut + 1}")
                # Mid-stream: a batch is in flight, and the producer retries it (with its
                # sequence) until the cluster is back, then goes on.
                leader = cluster.leader(topic)
                assert leader >= 0
                power_loss(cluster, disks)
                for disk in disks:
                    disk.mount()
                # The old leader comes back last, so that a former follower may lead first with
                # only what it had fsynced, and the old leader's log is cut to match it. One
                # started after the other: brokers registering together are fenced (new
                # incarnations) while the dead leader still counts as active for a session
                # timeout, and the controller then keeps the old leader alone in the ISR.
                for b in range(3):
                    if b != leader:
                        cluster.start(b, BROKER_FSYNC="always")

                def settled(old: int = leader) -> bool:
                    return first_leader(cluster, topic, old) >= 0

                wait_for(settled, 30, "a former follower leading, or the ISR the old leader alone")
                cluster.start(leader, BROKER_FSYNC="always")
                wait_all_active(cluster)
            acknowledge_more(load, 10, 60, "acks after the last power loss")
            high_watermark = check_after_healing(cluster, topic, load, reader=reader)
        finally:
            cluster.stop_all()
        replicas_identical(tmp_path, topic, high_watermark)
    finally:
        for disk in disks:
            disk.unmount()


def test_power_loss_under_fsync_never_loses_acknowledged_records(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("power")
    disks = lazy_disks(cluster)
    try:
        try:
            power_on(cluster, disks, "never")
            # Under `never` a segment's data is fdatasynced only when it rolls or closes
            # (headwater_broker.log.partition: PartitionLog._roll, close and truncation), so with
            # the default segment.bytes (1 GiB) and no leadership change, nothing produced is
            # ever synced: every acknowledged record is lost, exactly.
            create_topic(cluster, topic, configs={"min.insync.replicas": "2"})
            producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
            load = Producer(cluster, topic, producer)
            load.start()
            acknowledge_more(load, 40, 60, "acks before the power loss")
            load.stop()
            assert not load.errors, load.errors
            values, _end = read_values(cluster, topic, max(load.last_offsets) + 1)
            assert values == load.acknowledged  # all there while the power is on
            power_loss(cluster, disks)
            power_on(cluster, disks, "never")
            wait_for(lambda: cluster.leader(topic) >= 0, 30, "a leader after the power returns")
            values, high_watermark = read_values(cluster, topic, 0)
            assert len(load.acknowledged) >= 200
            assert (values, high_watermark) == ([], 0)
        finally:
            cluster.stop_all()
    finally:
        for disk in disks:
            disk.unmount()
