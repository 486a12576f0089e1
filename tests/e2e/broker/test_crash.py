"""Broker crash safety in real processes: kill -9 under fsync=always, torn and garbage tails."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from headwater.records.batch import decode_batches, encode_batch, iter_batches
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e

BATCHES = {"content-type": "application/vnd.headwater.batches"}


def start_broker(data_dir: Path, log_path: Path, fsync: str) -> ServiceProcess:
    port = free_port()
    env = {"BROKER_DATA_DIR": str(data_dir), "BROKER_PORT": str(port), "BROKER_FSYNC": fsync}
    return ServiceProcess("headwater_broker", port, env, log_path=log_path).start()


def read_all(url: str, topic: str) -> list[tuple[int, bytes | None]]:
    """Every record of partition 0 as (offset, value), fetched as raw batches."""
    records: list[tuple[int, bytes | None]] = []
    offset = 0
    with httpx.Client(base_url=url, timeout=10) as client:
        while True:
            response = client.get(
                f"/topics/{topic}/partitions/0/records",
                params={"offset": offset},
                headers={"accept": "application/vnd.headwater.batches"},
            )
            response.raise_for_status()
            if not response.content:
                return records
            records.extend((r.offset, r.value) for r in decode_batches(response.content))
            offset = int(response.headers["headwater-next-offset"])


# Every policy writes before acknowledging, so a process crash loses nothing under any of them;
# the policies differ only on a machine crash, which kill -9 cannot stage (the page cache
# survives it): test_power_loss.py stages one on a filesystem that drops unsynced writes.
@pytest.mark.parametrize("fsync", ["always", "never"])
def test_kill_9_loses_nothing_acknowledged(tmp_path: Path, fsync: str) -> None:
    topic = unique("crash")
    broker = start_broker(tmp_path / "data", tmp_path / "broker.log", fsync)
    acked: list[tuple[int, list[bytes]]] = []
    in_flight: list[bytes] = []
    stop = threading.Event()
    try:
        with httpx.Client(base_url=broker.url, timeout=10) as client:
            client.post(
                "/topics", json={"name": topic, "configs": {"segment.bytes": "20000"}}
            ).raise_for_status()
            producer = client.post("/producers", json={}).json()

        def produce() -> None:
            with httpx.Client(base_url=broker.url, timeout=10) as client:
                for i in range(5000):  # bounded; the kill normally comes long before
                    values = [f"{i}-{j}".encode() for j in range(10)]
                    body = encode_batch(
                        [(None, v, []) for v in values],
                        producer_id=producer["producer_id"],
                        producer_epoch=producer["producer_epoch"],
                        base_sequence=i * 10,
                    )
                    in_flight[:] = [body]
                    try:
                        response = client.post(
                            f"/topics/{topic}/partitions/0/batches", content=body, headers=BATCHES
                        )
                    except httpx.HTTPError:
                        return
                    if response.status_code != 200 or stop.is_set():
                        return
                    acked.append((response.json()["batches"][0]["base_offset"], values))
                    in_flight.clear()

        thread = threading.Thread(target=produce)
        thread.start()
        deadline = time.monotonic() + 30
        while len(acked) < 150 and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.01)
        broker.kill()
        stop.set()
        thread.join(timeout=20)
        assert len(acked) >= 150
    finally:
        broker.kill()

    broker = start_broker(tmp_path / "data", tmp_path / "broker.log", fsync)
    try:
        records = read_all(broker.url, topic)
        offsets = [offset for offset, _value in records]
        assert offsets == list(range(len(records)))  # in order, no gaps, nothing reused
        stored = dict(records)
        for base, sent in acked:
            expected: list[bytes | None] = list(sent)
            assert [stored[base + j] for j in range(len(sent))] == expected
        values = [value for _offset, value in records]
        assert len(values) == len(set(values))  # nothing twice
        assert len(records) in (10 * len(acked), 10 * len(acked) + 10)
        # The batch in flight at the kill, retried by the idempotent producer, is stored once.
        if in_flight:
            with httpx.Client(base_url=broker.url, timeout=10) as client:
                retry = client.post(
                    f"/topics/{topic}/partitions/0/batches", content=in_flight[0], headers=BATCHES
                )
            assert retry.status_code == 200, retry.text
            after = read_all(broker.url, topic)
            assert len(after) == 10 * len(acked) + 10
            assert len({value for _offset, value in after}) == len(after)
    finally:
        broker.stop()


def test_torn_and_garbage_tails_are_cut_to_the_valid_prefix(tmp_path: Path) -> None:
    topic = unique("torn")
    data_dir = tmp_path / "data"
    log_path = tmp_path / "broker.log"
    broker = start_broker(data_dir, log_path, "never")
    try:
        with httpx.Client(base_url=broker.url, timeout=10) as client:
            client.post("/topics", json={"name": topic}).raise_for_status()
            for i in range(20):
                body = encode_batch([(None, f"{i}-{j}".encode(), []) for j in range(i % 4 + 1)])
                client.post(
                    f"/topics/{topic}/partitions/0/batches", content=body, headers=BATCHES
                ).raise_for_status()
    finally:
        broker.kill()
    segment = data_dir / f"{topic}-0" / "00000000000000000000.log"
    original = segment.read_bytes()
    batches = list(iter_batches(original))
    rng = random.Random(20261125)
    for _round in range(3):
        cut = rng.randrange(1, len(original))
        garbage = rng.randbytes(rng.randrange(1, 200))
        segment.write_bytes(original[:cut] + garbage)
        whole = [(pos, h) for pos, h in batches if pos + h.size <= cut]
        valid_end = whole[-1][0] + whole[-1][1].size if whole else 0
        expected_end = whole[-1][1].last_offset + 1 if whole else 0
        log_path.write_bytes(b"")
        broker = start_broker(data_dir, log_path, "never")
        try:
            records = read_all(broker.url, topic)
            assert [offset for offset, _v in records] == list(range(expected_end))
            assert [v for _o, v in records] == [
                r.value for r in decode_batches(original[:valid_end])
            ]
            with httpx.Client(base_url=broker.url, timeout=10) as client:
                response = client.post(
                    f"/topics/{topic}/partitions/0/batches",
                    content=encode_batch([(None, b"after", [])]),
                    headers=BATCHES,
                )
            assert response.json()["batches"][0]["base_offset"] == expected_end
        finally:
            broker.kill()
        warnings = [
            json.loads(line)
            for line in log_path.read_text().splitlines()
            if line.startswith("{") and "truncating" in line
        ]
        assert [w["cut_bytes"] for w in warnings] == [cut + len(garbage) - valid_end]
