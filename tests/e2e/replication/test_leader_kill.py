"""Three broker processes, RF=3, min.insync.replicas=2: kill -9 the leader under acks=all load.

An idempotent producer sends unique values with acks=all, following the leader through 421s,
503s and refused connections (retrying each batch with its sequence, as the SDK does). The leader
is killed mid-stream and restarted. Afterwards every acknowledged value is in the partition
exactly once, in acknowledged order, and the three replicas' logs are byte-identical below the
high watermark.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from headwater.records.batch import decode_batches, encode_batch, iter_batches
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e

BATCHES = {"content-type": "application/vnd.headwater.batches"}
N_BATCHES = 240
PER_BATCH = 5


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ports = {b: free_port() for b in range(3)}
        self.procs: dict[int, ServiceProcess] = {}

    def start(self, broker_id: int) -> None:
        env = {
            "BROKER_ID": str(broker_id),
            "BROKER_PORT": str(self.ports[broker_id]),
            "BROKER_DATA_DIR": str(self.root / f"broker-{broker_id}"),
            "BROKER_METADATA_URL": f"sqlite:///{self.root / 'cluster.db'}",
            "BROKER_FSYNC": "never",
            "BROKER_REPLICA_LAG_TIME_MAX_MS": "4000",
            "BROKER_REQUEST_TIMEOUT_MS": "10000",
        }
        log_path = self.root / f"broker-{broker_id}.log"
        self.procs[broker_id] = ServiceProcess(
            "headwater_broker", self.ports[broker_id], env, log_path=log_path
        ).start()

    def url(self, broker_id: int) -> str:
        return f"http://127.0.0.1:{self.ports[broker_id]}"

    def alive(self) -> list[int]:
        return [b for b, p in self.procs.items() if p.running()]

    def describe(self, topic: str) -> dict[str, object] | None:
        for b in self.alive():
            try:
                answer = httpx.get(f"{self.url(b)}/topics/{topic}", timeout=5)
            except httpx.HTTPError:
                continue
            if answer.status_code == 200:
                partition: dict[str, object] = answer.json()["partitions"][0]
                return partition
        return None

    def leader(self, topic: str) -> int:
        described = self.describe(topic)
        leader = -1 if described is None else described["leader"]
        assert isinstance(leader, int)
        return leader

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop()


def wait_for(condition: object, timeout_s: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def partition_log(data_dir: Path, topic: str) -> bytes:
    """The batches of a replica's partition directory, segments in offset order."""
    directory = data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def below(data: bytes, end: int) -> bytes:
    """The whole batches of ``data`` that end before offset ``end``."""
    cut = 0
    for pos, header in iter_batches(data):
        if header.last_offset >= end:
            break
        cut = pos + header.size
    return data[:cut]


def test_kill_9_of_the_leader_loses_no_acknowledged_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("repl")
    try:
        for b in range(3):
            cluster.start(b)

        def all_active() -> bool:
            brokers = httpx.get(f"{cluster.url(0)}/cluster", timeout=5).json()["brokers"]
            return sum(1 for b in brokers if b["state"] == "active") == 3

        wait_for(all_active, 30, "three active brokers")
        created = httpx.post(
            f"{cluster.url(0)}/topics",
            json={
                "name": topic,
                "partitions": 1,
                "replication_factor": 3,
                "configs": {"min.insync.replicas": "2", "segment.bytes": "4000"},
            },
            timeout=10,
        )
        assert created.status_code == 201, created.text
        wait_for(lambda: cluster.leader(topic) >= 0, 30, "a leader")
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()

        acknowledged: list[str] = []
        errors: list[str] = []
        done = threading.Event()

        def produce() -> None:
            with httpx.Client(timeout=15) as client:
                leader = cluster.leader(topic)
                for i in range(N_BATCHES):
                    values = [f"v{i}-{j}" for j in range(PER_BATCH)]
                    body = encode_batch(
                        [(None, v.encode(), []) for v in values],
                        producer_id=producer["producer_id"],
                        producer_epoch=producer["producer_epoch"],
                        base_sequence=i * PER_BATCH,
                    )
                    deadline = time.monotonic() + 60
                    while True:
                        if time.monotonic() > deadline:
                            errors.append(f"batch {i} never acknowledged")
                            done.set()
                            return
                        try:
                            answer = client.post(
                                f"{cluster.url(leader)}/topics/{topic}/partitions/0/batches",
                                params={"acks": "all"},
                                content=body,
                                headers=BATCHES,
                            )
                        except httpx.HTTPError:
                            answer = None
                        if answer is not None and answer.status_code == 200:
                            acknowledged.extend(values)
                            break
                        if answer is not None and answer.status_code not in (421, 503, 504):
                            errors.append(f"batch {i}: {answer.status_code} {answer.text}")
                            done.set()
                            return
                        time.sleep(0.05)
                        leader = max(cluster.leader(topic), 0)
            done.set()

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        wait_for(lambda: len(acknowledged) >= 40 * PER_BATCH or done.is_set(), 60, "acks")
        victim = cluster.leader(topic)
        cluster.procs[victim].kill()
        wait_for(
            lambda: cluster.leader(topic) not in (-1, victim), 30, "a new leader after kill -9"
        )
        cluster.start(victim)
        thread.join(timeout=180)
        assert not thread.is_alive(), "the producer did not finish"
        assert not errors, errors
        assert len(acknowledged) == N_BATCHES * PER_BATCH

        def all_in_sync() -> bool:
            described = cluster.describe(topic)
            return described is not None and sorted(described["isr"]) == [0, 1, 2]  # type: ignore[call-overload]

        wait_for(all_in_sync, 60, "the restarted broker back in the ISR")
        leader = cluster.leader(topic)
        values: list[str] = []
        offset = 0
        with httpx.Client(base_url=cluster.url(leader), timeout=10) as client:
            while True:
                answer = client.get(
                    f"/topics/{topic}/partitions/0/records",
                    params={"offset": offset},
                    headers={"accept": "application/vnd.headwater.batches"},
                )
                answer.raise_for_status()
                if not answer.content:
                    break
                values.extend(
                    bytes(r.value or b"").decode() for r in decode_batches(answer.content)
                )
                offset = int(answer.headers["headwater-next-offset"])
        high_watermark = offset
        assert len(values) == len(set(values)), "a value stored twice"
        positions = {v: i for i, v in enumerate(values)}
        lost = [v for v in acknowledged if v not in positions]
        assert not lost, f"{len(lost)} acknowledged values lost, first {lost[:5]}"
        order = [positions[v] for v in acknowledged]
        assert order == sorted(order)
        # Let the followers copy the last high watermark, then compare the replicas on disk.
        time.sleep(1.0)
    finally:
        cluster.stop_all()
    logs = [below(partition_log(tmp_path / f"broker-{b}", topic), high_watermark) for b in range(3)]
    assert logs[0] == logs[1] == logs[2]
    assert len(list(iter_batches(logs[0]))) > 0
