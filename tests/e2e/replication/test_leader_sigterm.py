"""Three broker processes, RF=3, min.insync.replicas=2: SIGTERM the leader under load from the
SDK's idempotent acks=all Producer, five times in a row (restarting it each time).

SIGTERM is a controlled shutdown (docs/cluster.md): the broker asks the controller to move its
leaderships to the other in-sync replicas while it still answers (421 naming the new leader),
waits until it leads nothing, then stops. The SDK follows the 421s, so no send fails: every
delivery report is a success. Each restarted broker catches up, rejoins the in-sync set and, as
the partition's first replica, gets its leadership back (preferred leader). Afterwards every
acknowledged value is in the partition once, in produce order, and the replicas' logs are
byte-identical below the high watermark.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from headwater.producer import Producer
from tests.e2e.replication.cluster import (
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

SIGTERMS = 5
RECORDS_BETWEEN = 300


class SdkLoad:
    """The SDK Producer sending unique values to partition 0 in a thread until stopped."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.topic = topic
        self.config = {
            "bootstrap.servers": ",".join(cluster.url(b) for b in range(3)),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": 60_000,
            "request.timeout.ms": 15_000,
        }
        self.sent: list[tuple[str, object]] = []
        self.failed: list[str] = []
        self.delivered = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _on_delivery(self, err: object, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.failed.append(str(err))
            else:
                self.delivered += 1

    def _run(self) -> None:
        try:
            with Producer(self.config) as producer:
                for i in range(200_000):  # bounded; the test stops it long before
                    if self._stop.is_set():
                        break
                    value = f"s{i}"
                    future = producer.produce(
                        self.topic, value.encode(), partition=0, on_delivery=self._on_delivery
                    )
                    self.sent.append((value, future))
                    producer.poll(0)
                    time.sleep(0.002)
                assert producer.flush(90) == 0, "records left undelivered"
        except BaseException as exc:  # reported by the test
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=150)
        assert not self._thread.is_alive(), "the producer did not stop"

    def acknowledged(self) -> list[str]:
        out = []
        for value, future in self.sent:
            assert hasattr(future, "exception")
            if future.exception(0) is None:
                out.append(value)
        return out


def test_sigterm_of_the_leader_fails_no_send(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("sigterm")
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        described = cluster.describe(topic)
        assert described is not None
        preferred = described["replicas"][0]["broker"]  # type: ignore[index]
        assert isinstance(preferred, int)

        def in_sync_under_preferred() -> bool:
            now = cluster.describe(topic)
            isr = [] if now is None else now["isr"]
            return (
                now is not None
                and isinstance(isr, list)
                and sorted(isr) == [0, 1, 2]
                and now["leader"] == preferred
            )

        wait_for(in_sync_under_preferred, 60, "every replica in sync under the preferred leader")
        load = SdkLoad(cluster, topic)
        load.start()
        for term in range(SIGTERMS):
            # Each SIGTERM comes with every replica in sync, the preferred leader back, and
            # more delivered since the last.
            wait_for(in_sync_under_preferred, 90, f"the preferred leader back before {term + 1}")
            target = load.delivered + RECORDS_BETWEEN

            def sent(target: int = target) -> bool:
                return load.delivered >= target or load.error is not None

            wait_for(sent, 60, "sends")
            assert load.error is None, load.error
            victim = cluster.leader(topic)
            proc = cluster.processes[victim]
            proc.stop()  # SIGTERM; waits for the exit
            assert proc.process is not None
            # Exited on its own (uvicorn re-raises SIGTERM after a clean shutdown), not killed.
            assert proc.process.returncode in (0, -15), proc.process.returncode
            cluster.start(victim)
        wait_for(in_sync_under_preferred, 90, "the preferred leader back after the last SIGTERM")
        target = load.delivered + RECORDS_BETWEEN
        wait_for(lambda: load.delivered >= target or load.error is not None, 60, "sends after")
        load.stop()
        assert load.error is None, load.error
        assert not load.failed, f"{len(load.failed)} failed sends, first {load.failed[:3]}"
        acknowledged = load.acknowledged()
        assert len(acknowledged) == len(load.sent)
        # Each stop was a controlled one: the broker moved its leaderships before exiting.
        log = (tmp_path / f"broker-{preferred}.log").read_text(errors="replace")
        assert log.count("leads nothing after") == SIGTERMS, log[-3000:]
        wait_for(
            lambda: cluster.high_watermark(topic) >= len(acknowledged),
            30,
            "the high watermark past every acknowledged record",
        )
        values, high_watermark = read_values(cluster, topic, len(acknowledged))
        check_acknowledged(values, acknowledged)
        time.sleep(1.0)  # the followers copy the last high watermark
    finally:
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
