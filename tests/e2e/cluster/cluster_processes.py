"""Brokers as real processes forming one cluster on a shared metadata database (test support)."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from headwater.records.batch import encode_batch
from tests.support.cluster import BrokerCluster
from tests.support.waiting import wait_until

T = TypeVar("T")

LEASE_S = 2.0
SESSION_S = 1.5
BATCHES = "application/vnd.headwater.batches"


class Cluster(BrokerCluster):
    """Brokers 0..n-1 (``racks`` gives some a rack), with a shared HTTP client for the tests."""

    def __init__(
        self, root: Path, metadata_url: str, size: int, racks: dict[int, str] | None = None
    ) -> None:
        super().__init__(root, size, metadata_url)
        self.racks = racks or {}
        self.start_timeout_s = 120.0
        self.client = httpx.Client(timeout=30.0)

    def env(self, broker_id: int, **extra: str) -> dict[str, str]:
        rack = {"BROKER_RACK": self.racks[broker_id]} if broker_id in self.racks else {}
        return super().env(broker_id, **rack, **extra)

    def stop(self) -> None:
        self.stop_all()
        self.client.close()

    def get(self, broker_id: int, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(self.url(broker_id) + path, **kwargs)

    def post(self, broker_id: int, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.post(self.url(broker_id) + path, **kwargs)

    def cluster(self, broker_id: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.get(broker_id, "/cluster").json()
        return answer

    def controller(self, broker_id: int) -> tuple[int, int]:
        c = self.cluster(broker_id)["controller"]
        return int(c["broker_id"]), int(c["epoch"])

    def live(self) -> list[int]:
        return self.running()

    def produce(self, broker_id: int, topic: str, partition: int, value: bytes) -> httpx.Response:
        return self.post(
            broker_id,
            f"/topics/{topic}/partitions/{partition}/batches",
            content=encode_batch([(None, value, [])]),
            headers={"content-type": BATCHES},
        )

    def values(self, broker_id: int, topic: str, partition: int) -> list[str]:
        answer = self.get(
            broker_id,
            f"/topics/{topic}/partitions/{partition}/records",
            params={"offset": 0, "max_bytes": 10_000_000},
            headers={"accept": "application/vnd.kafka.binary.v2+json"},
        )
        answer.raise_for_status()
        import base64

        return [base64.b64decode(r["value"]).decode() for r in answer.json()]


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy (bounded); errors count as not yet."""
    return wait_until(check, timeout_s, what, errors=(httpx.HTTPError, KeyError, ValueError))


@contextmanager
def running_cluster(
    root: Path, metadata_url: str, size: int, racks: dict[int, str] | None = None
) -> Iterator[Cluster]:
    cluster = Cluster(root, metadata_url, size, racks)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()


def stop_outside_a_write(send: Callable[[signal.Signals], None], metadata_url: str) -> None:
    """SIGSTOP a process through ``send``, but not while it holds SQLite's write lock.

    A process stopped inside a SQLite write transaction blocks every other writer of the file
    until it resumes (a documented limit of the SQLite store, for one host); PostgreSQL ends
    such a session after the stall timeout instead. Tests about what a stopped controller can do
    after it resumes stop it outside a transaction: stop, probe the lock, and if the process
    holds it, let it go on briefly and try again.
    """
    for _ in range(50):
        send(signal.SIGSTOP)
        if not metadata_url.startswith("sqlite"):
            return
        probe = sqlite3.connect(metadata_url.removeprefix("sqlite:///"), timeout=0.3)
        probe.isolation_level = None
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            send(signal.SIGCONT)
            time.sleep(0.03)
        finally:
            probe.close()
    raise AssertionError("could not stop the process outside a write transaction")
