"""Three broker processes, RF=3, min.insync.replicas=2: kill -9 the leader under acks=all load,
five times in a row (restarting it each time).

An idempotent producer sends unique values with acks=all, following the leader through 421s,
503s and refused connections (retrying each batch with its sequence, as the SDK does). The leader
is killed mid-stream and restarted, five times. Afterwards every acknowledged value is in the
partition exactly once, in acknowledged order, and the three replicas' logs are byte-identical
below the high watermark.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    PER_BATCH,
    Cluster,
    Producer,
    check_acknowledged,
    create_topic,
    read_values,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = pytest.mark.e2e

BATCHES_BETWEEN_KILLS = 30
KILLS = 5


def test_kill_9_of_the_leader_loses_no_acknowledged_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("repl")
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()

        load = Producer(cluster, topic, producer)
        acknowledged = load.acknowledged
        errors = load.errors
        done = load.done
        last_offsets = load.last_offsets

        def all_in_sync() -> bool:
            described = cluster.describe(topic)
            isr = [] if described is None else described["isr"]
            return isinstance(isr, list) and sorted(isr) == [0, 1, 2]

        load.start()
        for kill in range(KILLS):
            # Each kill comes with every replica in sync again and more acknowledged since.
            wait_for(all_in_sync, 60, "every replica back in the ISR")
            target = len(acknowledged) + BATCHES_BETWEEN_KILLS * PER_BATCH

            def reached(target: int = target) -> bool:
                return len(acknowledged) >= target or done.is_set()

            wait_for(reached, 60, "acks")
            assert not done.is_set(), f"the producer stopped before kill {kill + 1}: {errors}"
            victim = cluster.leader(topic)
            cluster.processes[victim].kill()

            def moved(victim: int = victim) -> bool:
                return cluster.leader(topic) not in (-1, victim)

            wait_for(moved, 30, "a new leader after kill -9")
            cluster.start(victim)
        target = len(acknowledged) + BATCHES_BETWEEN_KILLS * PER_BATCH
        wait_for(lambda: len(acknowledged) >= target or done.is_set(), 60, "acks after the kills")
        load.stop()
        assert not errors, errors
        wait_for(all_in_sync, 60, "the restarted broker back in the ISR")
        # A new leader's high watermark catches up with its followers' next fetches.
        wait_for(
            lambda: cluster.high_watermark(topic) > max(last_offsets),
            30,
            "the high watermark past every acknowledged offset",
        )
        values, high_watermark = read_values(cluster, topic, max(last_offsets) + 1)
        check_acknowledged(values, acknowledged)
        # Let the followers copy the last high watermark, then compare the replicas on disk.
        time.sleep(1.0)
    finally:
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
