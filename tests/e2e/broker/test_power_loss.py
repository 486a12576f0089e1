"""One broker loses power (its data directory on tests/support/lazyfs.py, which keeps written
data in memory until fsync): under ``BROKER_FSYNC=always`` every acknowledged record is still
there; under ``never`` none is, since nothing of the one short segment was ever synced; under
``interval`` at most the appends of the last interval are lost (docs/broker.md).

The broker's metadata store (SQLite) lies outside the lazy disk: this is about the log.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from headwater.records.batch import encode_batch
from tests.e2e.broker.test_crash import BATCHES, read_all
from tests.support import ServiceProcess, free_port, unique
from tests.support.lazyfs import LazyMount

pytestmark = [pytest.mark.e2e, pytest.mark.needs("root", "fuse")]

BATCH_COUNT = 50


def start_broker(tmp_path: Path, port: int, fsync: str, **settings: object) -> ServiceProcess:
    env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path / "data"),
        "BROKER_METADATA_URL": f"sqlite:///{tmp_path / 'cluster.db'}",
        "BROKER_FSYNC": fsync,
        **{name: str(value) for name, value in settings.items()},
    }
    return ServiceProcess("headwater_broker", port, env, log_path=tmp_path / "broker.log").start()


def produce(client: httpx.Client, topic: str, rounds: range) -> list[bytes]:
    """One acknowledged batch of five values per round; the values, in order."""
    acknowledged: list[bytes] = []
    for i in rounds:
        values = [f"{i}-{j}".encode() for j in range(5)]
        body = encode_batch([(None, v, []) for v in values])
        answer = client.post(f"/topics/{topic}/partitions/0/batches", content=body, headers=BATCHES)
        assert answer.status_code == 200, answer.text
        acknowledged.extend(values)
    return acknowledged


@pytest.mark.parametrize("fsync", ["always", "never"])
def test_power_loss_keeps_acknowledged_records_only_under_fsync_always(
    tmp_path: Path, fsync: str
) -> None:
    topic = unique("power")
    port = free_port()
    with LazyMount(tmp_path / "disk", tmp_path / "data", tmp_path / "lazyfs.log") as disk:
        broker = start_broker(tmp_path, port, fsync)
        acknowledged: list[bytes] = []
        try:
            with httpx.Client(base_url=broker.url, timeout=10) as client:
                client.post("/topics", json={"name": topic}).raise_for_status()
                acknowledged.extend(produce(client, topic, range(BATCH_COUNT)))
            assert [v for _o, v in read_all(broker.url, topic)] == acknowledged
        finally:
            broker.kill()
        disk.crash()
        disk.mount()
        broker = start_broker(tmp_path, port, fsync)
        try:
            stored = [v for _o, v in read_all(broker.url, topic)]
        finally:
            broker.stop()
    assert stored == (acknowledged if fsync == "always" else [])


def test_power_loss_under_fsync_interval_loses_at_most_the_last_interval(tmp_path: Path) -> None:
    """``interval``: what was acknowledged more than one sync interval before the power went
    survives, and what survives is a prefix of what was acknowledged (no hole, no reorder)."""
    topic = unique("power")
    port = free_port()
    interval_ms = 200
    with LazyMount(tmp_path / "disk", tmp_path / "data", tmp_path / "lazyfs.log") as disk:
        broker = start_broker(tmp_path, port, "interval", BROKER_FSYNC_INTERVAL_MS=interval_ms)
        acknowledged: list[bytes] = []
        try:
            with httpx.Client(base_url=broker.url, timeout=10) as client:
                client.post("/topics", json={"name": topic}).raise_for_status()
                acknowledged.extend(produce(client, topic, range(BATCH_COUNT)))
                synced = len(acknowledged)
                time.sleep(5 * interval_ms / 1000)  # several background syncs
                # ... then the power goes right after these
                acknowledged.extend(produce(client, topic, range(BATCH_COUNT, 2 * BATCH_COUNT)))
        finally:
            broker.kill()
        disk.crash()
        disk.mount()
        broker = start_broker(tmp_path, port, "interval", BROKER_FSYNC_INTERVAL_MS=interval_ms)
        try:
            stored = [v for _o, v in read_all(broker.url, topic)]
        finally:
            broker.stop()
    assert stored == acknowledged[: len(stored)]
    assert len(stored) >= synced
