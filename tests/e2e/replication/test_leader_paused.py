"""A leader stopped (SIGSTOP) past its session timeout while producers go on, then resumed: it
acknowledges nothing once replaced, rejoins as a follower (its unreplicated tail cut by leader
epoch), and nothing acknowledged is lost."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    PER_BATCH,
    Cluster,
    Producer,
    batch_epochs,
    check_acknowledged,
    create_topic,
    read_values,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = pytest.mark.e2e


def test_a_replaced_leader_acknowledges_nothing_and_rejoins(
    tmp_path: Path, postgres_url: str
) -> None:
    # PostgreSQL, not SQLite: a process stopped inside a SQLite write transaction would hold
    # every other broker's metadata writes (docs/cluster.md).
    cluster = Cluster(tmp_path, postgres_url)
    topic = unique("stopped")
    old = -1
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer, timeout_s=2)
        load.start()
        wait_for(lambda: len(load.acknowledged) >= 30 * PER_BATCH, 60, "acknowledged writes")
        described = cluster.describe(topic)
        assert described is not None
        stopped_broker, old_epoch = described["leader"], described["leader_epoch"]
        assert isinstance(stopped_broker, int)
        assert isinstance(old_epoch, int)
        old = stopped_broker
        process = cluster.processes[old].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        wait_for(lambda: cluster.leader(topic) not in (-1, old), 30, "a new leader")
        before = len(load.acknowledged)
        wait_for(
            lambda: len(load.acknowledged) >= before + 30 * PER_BATCH,
            60,
            "writes acknowledged by the new leader",
        )
        process.send_signal(signal.SIGCONT)
        old = -1

        def all_in_sync() -> bool:
            described = cluster.describe(topic)
            isr = [] if described is None else described["isr"]
            return isinstance(isr, list) and sorted(isr) == [0, 1, 2]

        wait_for(all_in_sync, 60, "the resumed broker back in the ISR")
        # Once in sync it takes its preferred leadership back; reads below go to the leader, so
        # wait for that move rather than race it (a read at the old leader is answered 421).
        wait_for(lambda: cluster.leader(topic) == stopped_broker, 60, "the preferred leader back")
        before = len(load.acknowledged)
        wait_for(lambda: len(load.acknowledged) >= before + 10 * PER_BATCH, 60, "more writes")
        load.stop()
        assert not load.errors, load.errors
        wait_for(
            lambda: cluster.high_watermark(topic) > max(load.last_offsets),
            30,
            "the high watermark past every acknowledged offset",
        )
        leader_url = cluster.url(cluster.leader(topic))
        values, high_watermark = read_values(
            cluster, topic, max(load.last_offsets) + 1, url=leader_url
        )
        check_acknowledged(values, load.acknowledged)
        # What the stopped broker acknowledged after it was stopped (its answers then came
        # after it resumed), it acknowledged as leader of a later epoch (it is the preferred
        # leader and takes the partition back once in sync), never in the epoch it was replaced
        # in.
        epochs = batch_epochs(leader_url, topic)
        late = [
            (round(t - stopped_at, 2), last, epochs.get(last))
            for t, broker, status, last in load.answers
            if broker == stopped_broker and status == 200 and t > stopped_at + 0.5
        ]
        assert all((epoch or -1) > old_epoch for _t, _last, epoch in late), late
        time.sleep(1.0)
    finally:
        if old >= 0:
            process = cluster.processes[old].process
            if process is not None:
                process.send_signal(signal.SIGCONT)
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
