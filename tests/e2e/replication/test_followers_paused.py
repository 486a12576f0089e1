"""Followers paused (SIGSTOP) until the in-sync set is below min.insync.replicas: acks=all writes
are refused, never acknowledged; after SIGCONT they rejoin and writes succeed again, and nothing
acknowledged is missing."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from headwater.records.batch import encode_batch
from tests.e2e.replication.cluster import (
    BATCHES,
    Cluster,
    check_acknowledged,
    create_topic,
    read_values,
    replicas_identical,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = pytest.mark.e2e


def test_writes_are_refused_below_min_isr_and_succeed_after_resume(
    tmp_path: Path, postgres_url: str
) -> None:
    # PostgreSQL, not SQLite: a process stopped inside a SQLite write transaction (a paused
    # follower's heartbeat) would hold every other broker's metadata writes (docs/cluster.md).
    cluster = Cluster(tmp_path, postgres_url)
    topic = unique("paused")
    paused: list[int] = []
    try:
        start_three(
            cluster, BROKER_REPLICA_LAG_TIME_MAX_MS="1500", BROKER_REQUEST_TIMEOUT_MS="3000"
        )
        create_topic(cluster, topic)
        leader = cluster.leader(topic)
        followers = [b for b in range(3) if b != leader]
        url = f"{cluster.url(leader)}/topics/{topic}/partitions/0/batches"
        acknowledged: list[str] = []
        last_offsets: list[int] = []
        answers: list[tuple[float, int, int]] = []  # (time, status, error code)
        stop = threading.Event()

        def produce() -> None:
            with httpx.Client(timeout=15) as client:
                for i in range(100_000):  # bounded; stopped by the test long before
                    if stop.is_set():
                        return
                    values = [f"v{i}-{j}" for j in range(3)]
                    body = encode_batch([(None, v.encode(), []) for v in values])
                    try:
                        answer = client.post(
                            url, params={"acks": "all"}, content=body, headers=BATCHES
                        )
                    except httpx.HTTPError:
                        time.sleep(0.05)
                        continue
                    code = 0 if answer.status_code == 200 else answer.json()["error_code"]
                    answers.append((time.monotonic(), answer.status_code, code))
                    if answer.status_code == 200:
                        acknowledged.extend(values)
                        last_offsets.append(answer.json()["batches"][0]["last_offset"])
                    else:
                        time.sleep(0.05)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        wait_for(lambda: len(acknowledged) >= 30, 30, "acknowledged writes")
        for b in followers:
            proc = cluster.processes[b].process
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
            paused.append(b)
        wait_for(lambda: any(code == 50303 for _t, _s, code in answers), 30, "a refusal with 50303")
        refused_at = next(t for t, _s, code in answers if code == 50303)
        time.sleep(1.0)
        for b in followers:
            proc = cluster.processes[b].process
            assert proc is not None
            proc.send_signal(signal.SIGCONT)
        paused.clear()
        resumed_at = time.monotonic()
        # Once the in-sync set was below the minimum, nothing was acknowledged until resumed.
        during = [(s, c) for t, s, c in answers if refused_at <= t < resumed_at]
        assert during
        assert all(s != 200 for s, _c in during), during
        assert {c for _s, c in during} <= {50303, 50304, 50401}
        wait_for(
            lambda: any(t > resumed_at and s == 200 for t, s, _c in answers),
            60,
            "an acknowledged write after the followers resumed",
        )
        stop.set()
        thread.join(timeout=30)

        def all_in_sync() -> bool:
            described = cluster.describe(topic)
            isr = [] if described is None else described["isr"]
            return isinstance(isr, list) and sorted(isr) == [0, 1, 2]

        wait_for(all_in_sync, 60, "the followers back in the ISR")
        wait_for(
            lambda: cluster.high_watermark(topic) > max(last_offsets),
            30,
            "the high watermark past every acknowledged offset",
        )
        values, high_watermark = read_values(cluster, topic, max(last_offsets) + 1)
        check_acknowledged(values, acknowledged)
        time.sleep(1.0)
    finally:
        for b in paused:
            proc = cluster.processes[b].process
            if proc is not None:
                proc.send_signal(signal.SIGCONT)
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
