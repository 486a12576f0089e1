"""Broker throughput beside Redis Streams and NATS JetStream, measured in the same run.

What is measured (each for a bounded few seconds, loopback only):

* **batch ingest** -- pre-encoded RecordBatch v2 POSTed to ``/batches`` (several batches per
  request, one connection per partition, acks=1): the broker's own ceiling.
* **batch fetch** -- raw batches read back from offset 0 with the same connections, records
  counted from batch headers (what a consumer that decodes lazily or in Spark would see).
* **record validation** -- batch ingest with ``BROKER_VALIDATE_RECORDS`` off and on
  (fsync=never) of plain records, of keyed records with a header whose keys have one length
  (one layout: recognized without a walk) and of keyed ones whose keys vary (walked record by
  record): the "on" row says its rate as a ratio of the "off" row, what checking costs.
* **SDK producer** -- ``headwater.Producer.produce()`` per record, and ``produce_many()`` with
  1000 records per call, end to end (batching, encoding, HTTP, acks=all with idempotence), timed
  until ``flush()`` returns; only records the broker holds afterwards are counted.
* **SDK consumer** -- ``headwater.Consumer.consume(50000)`` decoding every record, and
  ``poll()`` taking them one at a time (confluent-kafka's loop).
* **Redis Streams** -- pipelined ``XADD`` and ``XREAD`` with redis-py + hiredis against the
  machine's Redis (127.0.0.1:6379), a unique key deleted afterwards.
* **NATS JetStream** -- ``publish_async`` into a unique file-storage stream and a pull
  consumer's ``fetch`` (127.0.0.1:4222), the stream deleted afterwards.

The broker runs as a real process on a free port with ``BROKER_FSYNC=never`` and ``interval``.
Run: ``python bench/broker.py`` (``--quick`` for a shorter pass). Other work on the machine
moves the numbers: read them as indicative, and compare rows of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from headwater import AdminClient, Consumer, Producer, TopicPartition  # noqa: E402
from headwater.client.broker import BrokerClient  # noqa: E402
from headwater.records import encode_batch, iter_batches  # noqa: E402
from headwater.records.encoder import RecordTuple  # noqa: E402
from headwater.types import PartitionId  # noqa: E402
from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

PARTITIONS = 4
BATCH_BYTES = 1_000_000  # below the default max.message.bytes (1048588)
BATCHES_PER_REQUEST = 4


@dataclass
class Row:
    system: str
    operation: str
    size: int
    records: int
    seconds: float
    note: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.rate * self.size / 1e6


def since(started: float) -> float:
    return time.perf_counter() - started


# -- the broker process -----------------------------------------------------------------------


class BrokerProcess(ServiceProcess):
    """``python -m headwater_broker`` on a free loopback port with a temporary data dir."""

    def __init__(
        self, fsync: str, validate_records: bool = True, validate_columnar: bool = True
    ) -> None:
        self.data = tempfile.TemporaryDirectory(prefix="headwater-bench-")
        port = free_port()
        env = {
            "BROKER_PORT": str(port),
            "BROKER_DATA_DIR": self.data.name,
            "BROKER_FSYNC": fsync,
            "BROKER_LOG_LEVEL": "warning",
            "BROKER_VALIDATE_RECORDS": str(validate_records).lower(),
            "BROKER_VALIDATE_COLUMNAR": str(validate_columnar).lower(),
        }
        super().__init__("headwater_broker", port, env)

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self.data.cleanup()


# -- Headwater measurements -------------------------------------------------------------------


def run_threads(count: int, work: Callable[[int], int]) -> tuple[int, float]:
    """Run ``work(i)`` on ``count`` threads; total of their results and the wall time."""
    results = [0] * count

    def target(i: int) -> None:
        results[i] = work(i)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(results), time.perf_counter() - started


def _request_body(size: int, kind: str) -> tuple[bytes, int]:
    """BATCHES_PER_REQUEST batches of ~1 MB each, of one kind of records: ``plain`` (no key, no
    header), ``fixed keys`` (keys of one length and a header: one layout for all) or ``varied
    keys`` (decimal ids, so key lengths differ, and a header: every record walked)."""
    value = os.urandom(size)
    records: list[RecordTuple]
    if kind == "plain":
        per_batch = max(1, BATCH_BYTES // (size + 12))
        records = [(None, value, [])] * per_batch
    else:
        per_batch = max(1, BATCH_BYTES // (size + 24))
        pattern = b"key-%06d" if kind == "fixed keys" else b"key-%d"
        records = [(pattern % i, value, [("h", b"1")]) for i in range(per_batch)]
    return encode_batch(records) * BATCHES_PER_REQUEST, per_batch * BATCHES_PER_REQUEST


def bench_ingest(url: str, size: int, seconds: float, connections: int, kind: str) -> Row:
    """Batch ingest alone (no fetch row): for the validation on / off comparison."""
    topic = f"bench-ingest-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": url}) as admin:
        admin.create_topic(topic, connections)
    body, per_request = _request_body(size, kind)

    def produce(partition: int) -> int:
        sent = 0
        with BrokerClient(url, timeout=60) as client:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                client.produce_batches(topic, partition, body, acks=1)
                sent += per_request
        return sent

    produced, elapsed = run_threads(connections, produce)
    return Row("Headwater", f"batch ingest {kind} ({connections} conns)", size, produced, elapsed)


def bench_batches(url: str, size: int, seconds: float, connections: int) -> tuple[Row, Row]:
    topic = f"bench-batches-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": url}) as admin:
        admin.create_topic(topic, connections)
    value = os.urandom(size)
    per_batch = max(1, BATCH_BYTES // (size + 12))
    batch = encode_batch([(None, value, ())] * per_batch)
    body = batch * BATCHES_PER_REQUEST
    per_request = per_batch * BATCHES_PER_REQUEST

    def produce(partition: int) -> int:
        sent = 0
        with BrokerClient(url, timeout=60) as client:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                client.produce_batches(topic, partition, body, acks=1)
                sent += per_request
        return sent

    produced, elapsed = run_threads(connections, produce)
    label = f"(HTTP, {connections} conns)"
    ingest = Row("Headwater", f"batch ingest {label}", size, produced, elapsed)

    def fetch(partition: int) -> int:
        read = 0
        offset = 0
        with BrokerClient(url, timeout=60) as client:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                got = client.fetch_batches(topic, partition, offset, max_bytes=8 * 1_048_576)
                if not got.data:
                    break
                for _pos, header in iter_batches(got.data, verify_crc=False):
                    read += header.records_count
                offset = got.next_offset
        return read

    fetched, elapsed = run_threads(connections, fetch)
    return ingest, Row("Headwater", f"batch fetch {label}", size, fetched, elapsed)


def _delivered(url: str, topic: str) -> int:
    with AdminClient({"bootstrap.servers": url}) as admin:
        return sum(admin.offsets(topic, p).end_offset for p in range(PARTITIONS))


def bench_sdk(url: str, size: int, seconds: float) -> list[Row]:
    """SDK producer rows (per-record ``produce()`` and bulk ``produce_many()``) and a consumer
    row; only records the broker really holds afterwards are counted."""
    rows = []
    value = os.urandom(size)
    config = {"bootstrap.servers": url, "linger.ms": 50}
    topics = []
    for bulk in (False, True):
        topic = f"bench-sdk-{uuid.uuid4().hex[:8]}"
        topics.append(topic)
        with AdminClient({"bootstrap.servers": url}) as admin:
            admin.create_topic(topic, PARTITIONS)
        with Producer(config) as producer:
            produce, produce_many = producer.produce, producer.produce_many
            produce(topic, value).result(30)
            values = [value] * 1000
            started = time.perf_counter()
            deadline = started + seconds
            while time.perf_counter() < deadline:
                if bulk:
                    produce_many(topic, values)
                else:
                    for _ in range(1000):
                        produce(topic, value)
            producer.flush()
            elapsed = since(started)
        delivered = _delivered(url, topic) - 1
        operation = "SDK Producer.produce_many() e2e" if bulk else "SDK Producer.produce() e2e"
        rows.append(Row("Headwater", operation, size, delivered, elapsed))

    config = {"bootstrap.servers": url, "auto.offset.reset": "earliest", "max.poll.records": 50_000}
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topics[0], PartitionId(p)) for p in range(PARTITIONS)])
        consumed = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            records = consumer.consume(50_000, 1.0)
            if not records:
                break
            consumed += len(records)
        operation = "SDK Consumer.consume() decode"
        rows.append(Row("Headwater", operation, size, consumed, since(started)))
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topics[0], PartitionId(p)) for p in range(PARTITIONS)])
        consumed = 0
        started = time.perf_counter()
        deadline = started + seconds
        poll = consumer.poll
        while time.perf_counter() < deadline:
            for _ in range(1000):
                if poll(1.0) is None:
                    break
                consumed += 1
            else:
                continue
            break
        operation = "SDK Consumer.poll() one by one"
        rows.append(Row("Headwater", operation, size, consumed, since(started)))
    return rows


def bench_validation(size: int, seconds: float, connections: int) -> list[Row]:
    """Ingest with BROKER_VALIDATE_RECORDS off and on (fsync=never) for each kind of records,
    measured back to back; "on" once with the exact walk alone (BROKER_VALIDATE_COLUMNAR off)
    and once as shipped. Each "on" row's note gives its rate as a ratio of "off"."""
    rows: list[Row] = []
    variants = (("off", False, False), ("on, walk only", True, False), ("on", True, True))
    for kind in ("plain", "fixed keys", "varied keys"):
        off: Row | None = None
        for name, validate, columnar in variants:
            with BrokerProcess(
                "never", validate_records=validate, validate_columnar=columnar
            ) as broker:
                row = bench_ingest(broker.url, size, seconds, connections, kind)
            if off is None:
                off = row
                row.note = " validate=off"
            else:
                ratio = row.rate / off.rate if off.rate else 0.0
                row.note = f" validate={name} {ratio:.2f}x"
            rows.append(row)
    return rows


# -- Redis Streams ------------------------------------------------------------------------------


def bench_redis(size: int, seconds: float) -> tuple[Row, Row] | str:
    try:
        import redis
    except ImportError:
        return "redis-py not installed"
    client = redis.Redis(host="127.0.0.1", port=6379)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"Redis unavailable: {exc}"
    key = f"headwater-bench:{uuid.uuid4().hex}"
    value = os.urandom(size)
    try:
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            pipe = client.pipeline(transaction=False)
            for _ in range(1000):
                pipe.xadd(key, {"v": value})
            pipe.execute()
            count += 1000
        written = Row(
            "Redis Streams", "XADD pipelined x1000", size, count, time.perf_counter() - started
        )
        read = 0
        last: Any = b"0-0"
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            answer: Any = client.xread({key: last}, count=10_000)
            if not answer:
                break
            entries = answer[0][1]
            read += len(entries)
            last = entries[-1][0]
        fetched = Row(
            "Redis Streams", "XREAD COUNT 10000", size, read, time.perf_counter() - started
        )
        return written, fetched
    finally:
        client.delete(key)
        client.close()


# -- NATS JetStream -----------------------------------------------------------------------------


async def _nats(size: int, seconds: float) -> tuple[Row, Row]:
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect("nats://127.0.0.1:4222", connect_timeout=2, max_reconnect_attempts=0)
    js = nc.jetstream()
    name = f"HWBENCH{uuid.uuid4().hex[:10].upper()}"
    subject = f"hwbench.{name.lower()}"
    await js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)
    value = os.urandom(size)
    try:
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for _ in range(1000):
                await js.publish_async(subject, value)
            count += 1000
        await js.publish_async_completed()
        written = Row(
            "NATS JetStream", "publish_async (file)", size, count, time.perf_counter() - started
        )
        sub = await js.pull_subscribe(subject, durable=None, stream=name)
        read = 0
        started = time.perf_counter()
        deadline = started + seconds
        while read < count and time.perf_counter() < deadline:
            try:
                messages = await sub.fetch(1000, timeout=1)
            except nats.errors.TimeoutError:
                break
            for m in messages:
                await m.ack()
            read += len(messages)
        fetched = Row(
            "NATS JetStream", "pull fetch 1000 + ack", size, read, time.perf_counter() - started
        )
        return written, fetched
    finally:
        await js.delete_stream(name)
        await nc.close()


def bench_nats(size: int, seconds: float) -> tuple[Row, Row] | str:
    try:
        return asyncio.run(_nats(size, seconds))
    except ImportError:
        return "nats-py not installed"
    except Exception as exc:
        return f"NATS unavailable: {type(exc).__name__}: {exc}"


# -- the table ----------------------------------------------------------------------------------


def print_table(rows: list[Row], notes: list[str]) -> None:
    def baseline(system: str, size: int, writes: bool) -> Row | None:
        for row in rows:
            is_write = not any(w in row.operation for w in ("fetch", "XREAD", "poll", "consume"))
            if row.system == system and row.size == size and is_write == writes:
                return row
        return None

    header = (
        f"{'system':<16}{'operation':<58}{'size':>6}{'records/s':>13}{'MB/s':>9}"
        f"{'vs Redis':>10}{'vs NATS':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        writes = not any(w in row.operation for w in ("fetch", "XREAD", "poll", "consume"))
        ratios = []
        for other in ("Redis Streams", "NATS JetStream"):
            base = baseline(other, row.size, writes)
            ratio = (
                f"{row.rate / base.rate:.1f}x"
                if base and base.rate and row.system == "Headwater"
                else ""
            )
            ratios.append(ratio)
        print(
            f"{row.system:<16}{row.operation + row.note:<58}{row.size:>6}{row.rate:>13,.0f}"
            f"{row.mb_per_s:>9.1f}{ratios[0]:>10}{ratios[1]:>9}"
        )
    for note in notes:
        print(f"note: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 s per row, fsync=never only")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement")
    parser.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    parser.add_argument(
        "--connections", type=int, default=4, help="connections (one partition each) for batches"
    )
    parser.add_argument(
        "--no-validation",
        dest="validation",
        action="store_false",
        help="skip the record validation on/off ingest rows",
    )
    args = parser.parse_args(argv)
    seconds = 1.0 if args.quick else args.seconds
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = ["never"] if args.quick else ["never", "interval"]
    rows: list[Row] = []
    notes: list[str] = []
    for size in sizes:
        for policy in policies:
            with BrokerProcess(policy) as broker:
                ingest, fetch = bench_batches(broker.url, size, seconds, args.connections)
                for row in (ingest, fetch):
                    row.note = f" fsync={policy}"
                rows.extend((ingest, fetch))
                if policy == policies[0]:
                    rows.extend(bench_sdk(broker.url, size, seconds))
            print(f"... {size} B, fsync={policy} done", file=sys.stderr)
        if args.validation:
            rows.extend(bench_validation(size, seconds, args.connections))
            print(f"... {size} B, validation on/off done", file=sys.stderr)
        for result in (bench_redis(size, seconds), bench_nats(size, seconds)):
            if isinstance(result, str):
                notes.append(result)
            else:
                rows.extend(result)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nHeadwater broker benchmark ({os.cpu_count()} CPUs, {seconds:g} s per row, "
        f"load average at the end {load})\n"
    )
    print_table(rows, sorted(set(notes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
