"""Replication cost on a three-broker cluster, measured in one run and printed side by side.

* **ingest** of 100-byte records in pre-encoded batches (1000 records a batch, 4 batches a
  request, 4 partitions, 2 requests in flight per partition), each to the partition's leader:
  RF=1 acks=1, RF=3 acks=1 and RF=3 acks=all (min.insync.replicas=2). The ratio of RF=3 acks=all
  to RF=1 is the number to read (issue target: >= 0.5; Kafka's 2014 figure 0.51 had each broker
  on its own machine, here three brokers and this client share the machine's cores).
  Each row has a topic of its own, deleted after it, and starts once every follower has caught
  up (the leaders' ``headwater_broker_follower_lag_records`` is 0): under acks=1 the followers
  fall behind, and an acks=all row started right after would first wait for them to copy that
  backlog, then for the kernel to write the earlier rows' gigabytes back to the disk.
* **produce-to-consume latency** at RF=3 acks=all and about 10,000 records/s (100 records every
  10 ms to one partition): each record carries its send time; a consumer long-polling the leader
  reports when it sees it (records appear to consumers only below the high watermark, so this
  is the replicated latency). p50 and p99.
* **unavailability after kill -9 of the leader**: a producer sending acks=all batches in a loop
  measures from its first failed send to its first acknowledged one at the new leader, for a few
  kills (the killed broker restarted and back in sync before the next).
* **SIGTERM of the leader** (a controlled shutdown), as many times, under the SDK's idempotent
  acks=all Producer: the failed sends it reports (target 0) and the longest wait between two
  deliveries (the restarted broker takes its preferred leadership back in between).

Brokers are real processes (``BROKER_FSYNC=never``) on free loopback ports sharing a SQLite
metadata file. Run: ``python bench/replication.py`` (``--quick`` for a shorter pass). Other work on
the machine moves the numbers: compare rows of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from headwater.producer import Producer  # noqa: E402
from headwater.records import encode_batch  # noqa: E402
from headwater.records.batch import decode_batches  # noqa: E402
from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

PARTITIONS = 4
RECORD_BYTES = 100
RECORDS_PER_BATCH = 1000
BATCHES_PER_REQUEST = 4
IN_FLIGHT = 2
BATCH_TYPE = {"content-type": "application/vnd.headwater.batches"}


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
            "BROKER_LOG_LEVEL": "warning",
        }
        self.procs[broker_id] = ServiceProcess(
            "headwater_broker",
            self.ports[broker_id],
            env,
            log_path=self.root / f"broker-{broker_id}.log",
            cwd=ROOT,
        ).start()

    def url(self, broker_id: int) -> str:
        return f"http://127.0.0.1:{self.ports[broker_id]}"

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()

    async def describe(self, client: httpx.AsyncClient, topic: str) -> list[dict[str, Any]]:
        for b, proc in self.procs.items():
            if not proc.running():
                continue
            try:
                answer = await client.get(f"{self.url(b)}/topics/{topic}")
            except httpx.HTTPError:
                continue
            if answer.status_code == 200:
                partitions: list[dict[str, Any]] = answer.json()["partitions"]
                return partitions
        return []

    async def leaders(self, client: httpx.AsyncClient, topic: str) -> dict[int, int]:
        return {p["partition"]: p["leader"] for p in await self.describe(client, topic)}

    async def wait(self, client: httpx.AsyncClient, topic: str, rf: int) -> None:
        """Until every partition has a leader and a full ISR, known to the leaders (bounded)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            parts = await self.describe(client, topic)
            if parts and all(p["leader"] >= 0 and len(p["isr"]) == rf for p in parts):
                # ... and every leader has applied the topic itself (metadata reaches each
                # broker one poll later than the broker that answered).
                leaders = {p["leader"] for p in parts}
                known = [await client.get(f"{self.url(b)}/topics/{topic}") for b in sorted(leaders)]
                if all(a.status_code == 200 for a in known):
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{topic} did not get leaders and a full ISR")


async def settle(cluster: Cluster, client: httpx.AsyncClient, seconds: float = 180) -> None:
    """Until no leader reports a follower behind its log end (bounded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lags: list[float] = []
        for b in cluster.procs:
            answer = await client.get(f"{cluster.url(b)}/metrics")
            for family in text_string_to_metric_families(answer.text):
                if family.name == "headwater_broker_follower_lag_records":
                    lags.extend(sample.value for sample in family.samples)
        if not any(lags):
            return
        await asyncio.sleep(0.2)
    raise RuntimeError("the followers did not catch up")


async def create_topic(
    cluster: Cluster, client: httpx.AsyncClient, name: str, partitions: int, rf: int
) -> None:
    """Create ``name`` (min.insync.replicas 2, or 1 at RF=1); return once it has leaders and a
    full ISR and every follower in the cluster has caught up."""
    answer = await client.post(
        f"{cluster.url(0)}/topics",
        json={
            "name": name,
            "partitions": partitions,
            "replication_factor": rf,
            "configs": {"min.insync.replicas": str(min(rf, 2))},
        },
    )
    answer.raise_for_status()
    await cluster.wait(client, name, rf)
    await settle(cluster, client)


def request_body() -> bytes:
    batch = encode_batch(
        [(None, b"x" * RECORD_BYTES, []) for _ in range(RECORDS_PER_BATCH)], timestamp_ms=1
    )
    return batch * BATCHES_PER_REQUEST


async def ingest(
    cluster: Cluster, client: httpx.AsyncClient, topic: str, acks: str, seconds: float
) -> float:
    leaders = await cluster.leaders(client, topic)
    body = request_body()
    per_request = RECORDS_PER_BATCH * BATCHES_PER_REQUEST
    acked = 0
    stop = time.monotonic() + seconds

    async def sender(partition: int) -> None:
        nonlocal acked
        url = f"{cluster.url(leaders[partition])}/topics/{topic}/partitions/{partition}/batches"
        while time.monotonic() < stop:
            answer = await client.post(url, content=body, headers=BATCH_TYPE, params={"acks": acks})
            if answer.status_code != 200:
                raise RuntimeError(f"{answer.status_code} {answer.text}")
            acked += per_request

    start = time.monotonic()
    await asyncio.gather(*(sender(p) for p in range(PARTITIONS) for _ in range(IN_FLIGHT)))
    return acked / (time.monotonic() - start)


async def latency(
    cluster: Cluster, client: httpx.AsyncClient, topic: str, seconds: float
) -> list[float]:
    leader = (await cluster.leaders(client, topic))[0]
    base = f"{cluster.url(leader)}/topics/{topic}/partitions/0"
    seen: list[float] = []
    done = asyncio.Event()

    async def consume() -> None:
        offset = 0
        while not done.is_set():
            answer = await client.get(
                f"{base}/records",
                params={"offset": offset, "max_wait_ms": 500},
                headers={"accept": "application/vnd.headwater.batches"},
            )
            now = time.perf_counter_ns()
            if answer.status_code != 200:  # e.g. the leader has not applied the create yet
                await asyncio.sleep(0.05)
                continue
            if answer.content:
                for record in decode_batches(answer.content):
                    (sent,) = struct.unpack_from(">q", record.value or b"")
                    seen.append((now - sent) / 1e6)
                offset = int(answer.headers["headwater-next-offset"])

    async def produce() -> None:
        stop = time.monotonic() + seconds
        tick = time.monotonic()
        while time.monotonic() < stop:
            sent = time.perf_counter_ns()
            value = struct.pack(">q", sent) + b"y" * (RECORD_BYTES - 8)
            body = encode_batch([(None, value, []) for _ in range(100)], timestamp_ms=1)
            answer = await client.post(
                f"{base}/batches", content=body, headers=BATCH_TYPE, params={"acks": "all"}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"{answer.status_code} {answer.text}")
            tick += 0.01
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
        await asyncio.sleep(1.0)
        done.set()

    await asyncio.gather(consume(), produce())
    return seen


async def unavailability(cluster: Cluster, client: httpx.AsyncClient, topic: str) -> float:
    """Seconds from the first failed acks=all send after kill -9 of the leader to the next ack."""
    body = encode_batch([(None, b"z" * RECORD_BYTES, [])], timestamp_ms=1)
    victim = (await cluster.leaders(client, topic))[0]
    cluster.procs[victim].kill()
    first_failure = time.monotonic()
    while True:
        leader = (await cluster.leaders(client, topic)).get(0, -1)
        if leader >= 0 and leader != victim:
            try:
                answer = await client.post(
                    f"{cluster.url(leader)}/topics/{topic}/partitions/0/batches",
                    content=body,
                    headers=BATCH_TYPE,
                    params={"acks": "all"},
                )
                if answer.status_code == 200:
                    took = time.monotonic() - first_failure
                    break
            except httpx.HTTPError:
                pass
        await asyncio.sleep(0.02)
    cluster.start(victim)
    await cluster.wait(client, topic, 3)
    return took


def sigterms(cluster: Cluster, topic: str, count: int) -> tuple[int, int, float]:
    """SIGTERM the leader of partition 0 ``count`` times (restarting it each time) while the
    SDK's idempotent acks=all Producer sends to it; (failed sends, sends, longest wait between
    two deliveries in seconds)."""
    config = {
        "bootstrap.servers": ",".join(cluster.url(b) for b in range(3)),
        "acks": "all",
        "linger.ms": 5,
        "delivery.timeout.ms": 60_000,
    }
    failed = 0
    delivered: list[float] = []
    stop = threading.Event()

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        if err is None:
            delivered.append(time.monotonic())
        else:
            failed += 1

    def load() -> None:
        with Producer(config) as producer:
            while not stop.is_set():
                producer.produce(topic, b"s" * RECORD_BYTES, partition=0, on_delivery=on_delivery)
                producer.poll(0)
                time.sleep(0.002)
            producer.flush(90)

    def state() -> dict[str, Any]:
        for b, proc in cluster.procs.items():
            if proc.running():
                with contextlib.suppress(httpx.HTTPError):
                    answer = httpx.get(f"{cluster.url(b)}/topics/{topic}", timeout=2)
                    if answer.status_code == 200:
                        partition: dict[str, Any] = answer.json()["partitions"][0]
                        return partition
        return {}

    def settled(preferred: int) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            now = state()
            if now.get("leader") == preferred and len(now.get("isr", [])) == 3:
                return
            time.sleep(0.1)
        raise RuntimeError("the preferred leader did not come back in sync")

    preferred = state()["replicas"][0]["broker"]
    sender = threading.Thread(target=load, daemon=True)
    sender.start()
    started = time.monotonic()
    for _ in range(count):
        settled(preferred)
        time.sleep(1.0)
        cluster.procs[preferred].stop()  # SIGTERM: a controlled shutdown
        cluster.start(preferred)
    settled(preferred)
    time.sleep(1.0)
    stop.set()
    sender.join(120)
    during = [t for t in delivered if t >= started]
    gaps = [b - a for a, b in itertools.pairwise(during)]
    return failed, len(delivered) + failed, max(gaps, default=0.0)


async def run(quick: bool) -> None:
    seconds = 3.0 if quick else 8.0
    kills = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp))
        try:
            for b in range(3):
                cluster.start(b)
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            async with httpx.AsyncClient(timeout=60, limits=limits) as client:
                rows = []
                for label, rf, acks in (
                    ("RF=1 acks=1", 1, "1"),
                    ("RF=3 acks=1", 3, "1"),
                    ("RF=3 acks=all", 3, "all"),
                ):
                    name = f"bench-rf{rf}-acks{acks}-{uuid.uuid4().hex[:6]}"
                    await create_topic(cluster, client, name, PARTITIONS, rf)
                    rows.append((label, await ingest(cluster, client, name, acks, seconds)))
                    # Deleted files take their dirty pages with them: the next row does not
                    # pay for writing this one's gigabytes back to the disk.
                    deleted = await client.delete(f"{cluster.url(0)}/topics/{name}")
                    deleted.raise_for_status()
                base = rows[0][1]
                print(f"ingest, {RECORD_BYTES} B records, pre-encoded batches, 3 brokers:")
                for label, rate in rows:
                    print(f"  {label:<14} {rate:>12,.0f} rec/s   {rate / base:5.2f}x RF=1")
                lat_topic = f"bench-lat-{uuid.uuid4().hex[:6]}"
                await create_topic(cluster, client, lat_topic, 1, 3)
                seen = sorted(await latency(cluster, client, lat_topic, seconds))
                p50 = seen[len(seen) // 2]
                p99 = seen[int(len(seen) * 0.99)]
                print(
                    f"produce-to-consume, RF=3 acks=all, ~10,000 rec/s: p50 {p50:.1f} ms, "
                    f"p99 {p99:.1f} ms ({len(seen)} records)"
                )
                outages = [await unavailability(cluster, client, lat_topic) for _ in range(kills)]
                print(
                    f"unavailability after kill -9 of the leader ({kills} kills): median "
                    f"{statistics.median(outages):.2f} s, max {max(outages):.2f} s"
                )
                failed, sends, gap = await asyncio.to_thread(sigterms, cluster, lat_topic, kills)
                print(
                    f"SIGTERM of the leader ({kills} times), SDK acks=all producer: {failed} "
                    f"failed sends of {sends} (target 0); longest wait between deliveries "
                    f"{gap:.2f} s"
                )
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a shorter pass")
    args = parser.parse_args()
    asyncio.run(run(args.quick))


if __name__ == "__main__":
    main()
