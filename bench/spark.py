"""Spark validation throughput on local[2] beside a single-process fastavro decode loop.

What is measured, in one run, over the same records:

* **fastavro loop** -- one Python process decoding every payload with
  ``fastavro.schemaless_reader`` (framing skipped, no checks, no I/O): the ceiling of a
  straightforward single-core consumer.
* **fastavro loop, set-up hoisted** -- the same loop calling fastavro's compiled ``_read_data``
  with the schema set-up done once, as the job's validator does per record: the fairer
  baseline, reported beside the issue's.
* **Spark read only** -- the ``headwater`` source alone: fetch and decode every record batch,
  count rows. Shows how much of the job is reading.
* **Spark validate** -- the validation job on ``local[2]`` (session already started): read every
  record from the broker over HTTP, check framing, look up the writer schema, decode with
  resolution into the expected schema, aggregate the summary. No outputs written.
* **Spark validate + Parquet** -- the same, also writing valid records as Parquet.
* **from_confluent_avro** -- the ``headwater`` source read plus the Arrow UDF decoding every value
  into the schema's struct (the column function users call outside the job).
* **SDK produce_many, 1 process** -- the SDK's idempotent Producer writing the same number of
  records of the same size from one process: the sink's baseline.
* **Spark sink** -- ``df.write.format("headwater")`` of those records from ``local[2]``.
* **Spark floors** -- what Spark itself costs, with nothing of ours per record: a Python data
  source yielding prebuilt Arrow batches of the source's rows (counted), and the sink's rows
  handed to Python as Arrow and dropped. The read and sink rows cannot go below them.

Targets (issue 13, on local[2]): read >= 2x the loop, validate >= 1.5x the loop, sink within 2x
of ``produce_many`` (>= 0.5x its rate); each row prints its ratio beside the target.

Spark rows are timed after an untimed warm-up job (Python worker start-up is not counted). The
broker and registry run as real processes on free loopback ports (``BROKER_FSYNC=never``);
records are written with pre-encoded batches, spread over ``--partitions`` partitions. Run:
``python bench/spark.py`` (1,000,000 records) or ``--records 100000`` for a quick pass. Other work
on the machine moves the numbers: read them as indicative and compare rows of the same run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import fastavro
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from headwater.client.broker import BrokerClient  # noqa: E402
from headwater.records import encode_batch  # noqa: E402
from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "at", "type": "long"},
    ],
}
RECORDS_PER_BATCH = 5000
TARGETS = {"read": 2.0, "validate": 1.5, "sink": 0.5}


def make_payloads(schema_id: int, count: int) -> list[bytes]:
    parsed = fastavro.parse_schema(ORDER)
    prefix = b"\x00" + struct.pack(">I", schema_id)
    rng = random.Random(7)
    out = []
    for i in range(count):
        buf = io.BytesIO()
        fastavro.schemaless_writer(
            buf,
            parsed,
            {
                "id": i,
                "customer": f"customer-{rng.randrange(10_000)}",
                "amount": round(rng.random() * 500, 2),
                "status": "PAID" if i % 3 else "NEW",
                "coupon": None if i % 4 else "SPRING",
                "at": 1_764_000_000_000 + i,
            },
        )
        out.append(prefix + buf.getvalue())
    return out


def produce(broker: str, topic: str, partitions: int, payloads: list[bytes]) -> None:
    client = BrokerClient(broker, timeout=120)
    try:
        per_partition = [payloads[p::partitions] for p in range(partitions)]
        for p, values in enumerate(per_partition):
            for start_at in range(0, len(values), RECORDS_PER_BATCH):
                chunk = values[start_at : start_at + RECORDS_PER_BATCH]
                batch = encode_batch([(None, v, ()) for v in chunk])
                client.produce_batches(topic, p, batch)
    finally:
        client.close()


def fastavro_loop(payloads: list[bytes]) -> float:
    parsed = fastavro.parse_schema(ORDER)
    reader = fastavro.schemaless_reader
    started = time.perf_counter()
    for value in payloads:
        reader(io.BytesIO(value[5:]), parsed, None)
    return time.perf_counter() - started


def fastavro_hoisted_loop(payloads: list[bytes]) -> float:
    """The loop with schemaless_reader's per-call set-up hoisted out, as the job's validator
    does (``fastavro._read._read_data`` on a prepared pair): the fairest single-core baseline."""
    from fastavro._read import (  # type: ignore[attr-defined]  # private, as in spark/validation.py
        _default_named_schemas,
        _read_data,
    )

    named = _default_named_schemas()
    parsed = fastavro.parse_schema(ORDER, named["writer"])
    options = {
        "return_record_name": False,
        "return_record_name_override": False,
        "handle_unicode_errors": "strict",
        "return_named_type": False,
        "return_named_type_override": False,
    }
    new_buffer = io.BytesIO
    started = time.perf_counter()
    for value in payloads:
        buf = new_buffer(value)
        buf.seek(5)
        _read_data(buf, parsed, named, None, options)
    return time.perf_counter() - started


class _FloorPartition:
    """Picklable work of one floor task: how many rows to yield."""

    def __init__(self, rows: int) -> None:
        self.rows = rows


def floor_source(records: int, tasks: int, batch_rows: int) -> Any:
    """A Python data source yielding prebuilt Arrow batches of the ``headwater`` source's rows:
    what Spark itself costs to take ``records`` rows from Python (no fetch, no decode)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from headwater_spark.source import source_schema

    class FloorReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(_FloorPartition(records // tasks)) for _ in range(tasks)]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs

            from headwater_spark.topic_log import ARROW_SCHEMA_NO_HEADERS

            rows = partition.value.rows
            n = min(batch_rows, rows)
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.nulls(n, pa.binary()),
                    pa.array([b"x" * 40] * n, pa.binary()),
                    pa.array(["bench-orders"] * n, pa.string()),
                    pa.array([0] * n, pa.int32()),
                    pa.array(range(n), pa.int64()),
                    pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                    pa.array([0] * n, pa.int32()),
                ],
                schema=ARROW_SCHEMA_NO_HEADERS,
            )
            for at in range(0, rows, n):
                yield batch.slice(0, min(n, rows - at))

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "headwater-bench-floor"

        def schema(self) -> Any:
            return source_schema(False)

        def reader(self, schema: Any) -> DataSourceReader:
            return FloorReader()

    return FloorSource


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-parquet", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds")
    args = parser.parse_args()
    # A SIGTERM (timeout, CI) unwinds through ``finally`` so the services started here stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from headwater_spark.job import JobConfig, ValidationJob
    from headwater_spark.session import build_session

    work = Path(tempfile.mkdtemp(prefix="headwater-bench-spark-"))
    registry_port, broker_port = free_port(), free_port()
    registry = f"http://127.0.0.1:{registry_port}"
    broker = f"http://127.0.0.1:{broker_port}"
    processes: list[ServiceProcess] = []
    try:
        processes.append(
            ServiceProcess(
                "headwater_registry",
                registry_port,
                {
                    "REGISTRY_PORT": str(registry_port),
                    "REGISTRY_DATABASE_URL": f"sqlite:///{work / 'registry.db'}",
                    "REGISTRY_LOG_LEVEL": "warning",
                },
                work / "registry.log",
            ).start()
        )
        processes.append(
            ServiceProcess(
                "headwater_broker",
                broker_port,
                {
                    "BROKER_PORT": str(broker_port),
                    "BROKER_DATA_DIR": str(work / "broker"),
                    "BROKER_FSYNC": "never",
                    "BROKER_LOG_LEVEL": "warning",
                },
                work / "broker.log",
            ).start()
        )
        topic = "bench-orders"
        httpx.post(
            f"{broker}/topics", json={"name": topic, "partitions": args.partitions}
        ).raise_for_status()
        response = httpx.post(
            f"{registry}/subjects/{topic}-value/versions",
            json={"schema": json.dumps(ORDER)},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        response.raise_for_status()
        schema_id = int(response.json()["id"])

        print(f"preparing {args.records:,} records ...", flush=True)
        payloads = make_payloads(schema_id, args.records)
        produce(broker, topic, args.partitions, payloads)
        size = sum(len(v) for v in payloads) / len(payloads)

        spark = build_session(args.master, app_name="headwater-bench", shuffle_partitions=2)
        cores = spark.sparkContext.defaultParallelism
        # Warm-up (untimed): the first jobs start Spark's Python workers and import their modules.
        warm_end = json.dumps({topic: {str(p): 1000 for p in range(args.partitions)}})
        for _ in range(2):
            ValidationJob(
                spark,
                JobConfig(
                    brokers=[broker],
                    registry=registry,
                    topic=topic,
                    ending_offsets=warm_end,
                    state_dir=str(work / "state"),
                    min_partitions=cores,
                ),
            ).run_batch()

        def read_only() -> tuple[int, float]:
            started = time.perf_counter()
            count = (
                spark.read.format("headwater")
                .option("brokers", broker)
                .option("subscribe", topic)
                .option("minPartitions", str(cores))
                .load()
                .count()
            )
            return count, time.perf_counter() - started

        def validate(**extra: Any) -> tuple[int, float]:
            config = JobConfig(
                brokers=[broker],
                registry=registry,
                topic=topic,
                state_dir=str(work / "state"),
                min_partitions=cores,
                **extra,
            )
            summary = ValidationJob(spark, config).run_batch()
            if summary.outcomes.get("valid") != args.records:
                raise RuntimeError(f"expected {args.records} valid, got {summary.outcomes}")
            return summary.total, summary.elapsed_s

        def decode_column() -> tuple[int, float]:
            from pyspark.sql import functions as sf

            from headwater_spark.avro_functions import from_confluent_avro

            started = time.perf_counter()
            decoded = (
                spark.read.format("headwater")
                .option("brokers", broker)
                .option("subscribe", topic)
                .option("minPartitions", str(cores))
                .load()
                .select(from_confluent_avro("value", registry, topic=topic).alias("o"))
                .agg(sf.count("o.id").alias("n"))
                .collect()[0]
                .n
            )
            return decoded, time.perf_counter() - started

        def sink(round_number: int) -> float:
            from pyspark.sql import functions as sf

            out = f"bench-sink-{round_number}"
            httpx.post(f"{broker}/topics", json={"name": out, "partitions": args.partitions})
            rows = spark.range(args.records, numPartitions=cores).select(
                sf.lit(sample_value).alias("value")
            )
            started = time.perf_counter()
            rows.write.format("headwater").option("brokers", broker).option("topic", out).mode(
                "append"
            ).save()
            return time.perf_counter() - started

        def produce_many(round_number: int) -> float:
            from headwater.producer import Producer

            out = f"bench-sdk-{round_number}"
            httpx.post(f"{broker}/topics", json={"name": out, "partitions": args.partitions})
            values = [sample_value] * args.records
            started = time.perf_counter()
            with Producer({"bootstrap.servers": broker}) as producer:
                for at in range(0, len(values), 100_000):
                    producer.produce_many(out, values[at : at + 100_000])
                if producer.flush(300):
                    raise RuntimeError("produce_many did not finish")
            return time.perf_counter() - started

        spark.dataSource.register(floor_source(args.records, 2, 50_000))

        def read_floor() -> float:
            started = time.perf_counter()
            count = spark.read.format("headwater-bench-floor").load().count()
            if count != args.records:
                raise RuntimeError(f"floor read {count} rows")
            return time.perf_counter() - started

        def sink_floor() -> float:
            """Spark's share of the sink: the same rows handed to Python as Arrow, dropped."""
            from pyspark.sql import functions as sf

            rows = spark.range(args.records, numPartitions=cores).select(
                sf.lit(sample_value).alias("value")
            )
            started = time.perf_counter()
            rows.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), rows.schema).count()
            return time.perf_counter() - started

        sample_value = payloads[0]
        loop_name = "fastavro decode loop, 1 process"
        hoisted_name = "fastavro loop, set-up hoisted, 1 process"
        read_name = f"Spark read only (no validation), {args.master}"
        validate_name = f"Spark validate, {args.master}"
        decode_name = f"from_confluent_avro, {args.master}"
        sdk_name = "SDK produce_many, 1 process"
        sink_name = f"Spark sink (write.format headwater), {args.master}"
        read_floor_name = f"Spark floor: prebuilt Arrow rows, count, {args.master}"
        sink_floor_name = f"Spark floor: rows to Python, dropped, {args.master}"
        times: dict[str, list[float]] = {
            loop_name: [],
            hoisted_name: [],
            read_name: [],
            validate_name: [],
            decode_name: [],
            sdk_name: [],
            sink_name: [],
            read_floor_name: [],
            sink_floor_name: [],
        }
        # Rounds alternate the loop and the Spark rows, so load from other work on the machine
        # hits them alike; best and median of the rounds are reported.
        loads: list[float] = []  # 1-min load average before each round (ours included)
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}/{args.rounds} ...", flush=True)
            loads.append(os.getloadavg()[0])
            times[loop_name].append(fastavro_loop(payloads))
            times[hoisted_name].append(fastavro_hoisted_loop(payloads))
            count, seconds = read_only()
            if count != args.records:
                raise RuntimeError(f"read {count} records, expected {args.records}")
            times[read_name].append(seconds)
            times[validate_name].append(validate()[1])
            decoded, seconds = decode_column()
            if decoded != args.records:
                raise RuntimeError(f"decoded {decoded} records, expected {args.records}")
            times[decode_name].append(seconds)
            times[sdk_name].append(produce_many(round_number))
            times[sink_name].append(sink(round_number))
            times[read_floor_name].append(read_floor())
            times[sink_floor_name].append(sink_floor())
        del payloads
        if not args.skip_parquet:
            times[f"Spark validate + Parquet, {args.master}"] = [
                validate(output_path=str(work / "valid"))[1]
            ]
        spark.stop()

        best_loop = args.records / min(times[loop_name])
        median_loop = args.records / statistics.median(times[loop_name])
        print()
        print(
            f"{args.records:,} records of {size:.0f} B (Confluent-framed Avro), "
            f"{args.partitions} partitions, {args.rounds} rounds; "
            f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
        )
        print(f"{'run':<52} {'best rec/s':>11} {'vs loop':>8} {'median rec/s':>13} {'vs loop':>8}")
        for name, samples in times.items():
            best = args.records / min(samples)
            median = args.records / statistics.median(samples)
            print(
                f"{name:<52} {best:>11,.0f} {best / best_loop:>7.2f}x "
                f"{median:>13,.0f} {median / median_loop:>7.2f}x"
            )

        def ratio(name: str, base: str) -> tuple[float, float]:
            return (
                min(times[base]) / min(times[name]),
                statistics.median(times[base]) / statistics.median(times[name]),
            )

        for label, name, base in (
            ("read", read_name, loop_name),
            ("validate", validate_name, loop_name),
            ("sink", sink_name, sdk_name),
        ):
            best, median = ratio(name, base)
            target = TARGETS[label]
            verdict = "met" if best >= target else "NOT met"
            print(
                f"target: {label} >= {target}x {'produce_many' if label == 'sink' else 'the loop'}"
                f": best {best:.2f}x, median {median:.2f}x ({verdict})"
            )
        vs_hoisted = [
            min(times[hoisted_name]) / min(times[validate_name]),
            statistics.median(times[hoisted_name]) / statistics.median(times[validate_name]),
        ]
        print(
            f"Spark validate vs the hoisted loop: best {vs_hoisted[0]:.2f}x, "
            f"median {vs_hoisted[1]:.2f}x"
        )
        return 0
    finally:
        for process in processes:
            process.stop()


if __name__ == "__main__":
    sys.exit(main())
