"""The validation pipeline: read a topic, validate every payload, write the outputs, summarize.

Driver side: resolving the expected schema and the offset range, planning, the outputs' control
flow, the ledger and the summary. Executor side: :func:`validate_batches` (inside ``mapInArrow``)
and :func:`produce_partition` (inside ``foreachPartition``); both create their HTTP clients where
they run.

Outputs and what a re-run over the same range guarantees:

- Parquet (``output_path``): valid records decoded into the expected schema's columns plus
  ``_topic, _partition, _offset, _timestamp, _schema_id``, partitioned by ``date`` (UTC, from the
  record timestamp) and ``range`` (a digest of the source offset range). Written with dynamic
  partition overwrite, so a re-run of the same range replaces exactly its own files.
- Topic outputs (dead-letter topic for invalid records, optional target topic for valid ones):
  records are produced with their key, value and headers unchanged, plus ``headwater.source.*``
  headers (and the reason, for dead letters); a source range is recorded in the
  ledger once its produce succeeded, and records in recorded ranges are not produced again. A run
  that dies mid-produce may leave some of its records produced without a ledger entry; the
  re-run then produces those again, each still carrying its ``headwater.source.*`` headers, the
  deterministic key consumers can dedup on.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from headwater.types import Offset, PartitionId
from headwater_spark.avro_types import converter, spark_type
from headwater_spark.ledger import RangeLedger
from headwater_spark.offsets import (
    OffsetRange,
    to_json_offsets,
)
from headwater_spark.registry import RegisteredSchema, SchemaRegistry
from headwater_spark.source import SOURCE_SCHEMA, resolve_ranges
from headwater_spark.summary import CountRow, Summary
from headwater_spark.topic_log import TopicLog
from headwater_spark.validation import INVALID, VALID
from headwater_spark.verdict_source import (
    COUNT_SCHEMA,
    HeadwaterVerdictSource,
    cached_validator,
    expected_option,
)
from headwater_spark.verdict_source import (
    FORMAT as VERDICT_FORMAT,
)

# Dead-letter headers added to each invalid record (its own headers are kept before them).
REASON_HEADER = "headwater.dlq.reason"
MESSAGE_HEADER = "headwater.dlq.message"
SOURCE_TOPIC_HEADER = "headwater.source.topic"
SOURCE_PARTITION_HEADER = "headwater.source.partition"
SOURCE_OFFSET_HEADER = "headwater.source.offset"
SCHEMA_ID_HEADER = "headwater.dlq.schema-id"


@dataclass
class JobConfig:
    """Everything one run needs; built from the command line by ``headwater_spark.validate``."""

    brokers: list[str]
    registry: str
    topic: str
    subject: str | None = None
    expected_version: int | None = None
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"
    output_path: str | None = None
    target_topic: str | None = None
    dead_letter_topic: str | None = None
    summary_path: str | None = None
    state_dir: str = "./data/validate"
    streaming: bool = False
    checkpoint: str | None = None
    available_now: bool = True
    trigger_seconds: float = 5.0
    timeout_seconds: float | None = None
    max_records_per_trigger: int | None = None
    max_records_per_partition: int = 200_000
    min_partitions: int = 1
    source_options: dict[str, str] = field(default_factory=dict)

    @property
    def expected_subject(self) -> str:
        return self.subject or f"{self.topic}-value"


# --- executor side ---------------------------------------------------------------------------


def validate_batches(
    registry_url: str, expected: RegisteredSchema, output: StructType
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: source rows in, their verdicts out.

    ``output`` (from :func:`output_schema`) names the source columns passed through, then the
    verdict columns, then ``data`` (the decoded record) only when an output stores it: turning
    decoded records into Arrow structs is a good part of the per-record cost.
    """
    expected_json = json.loads(expected.schema_str)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        validator = cached_validator(registry_url, expected)
        arrow_schema = to_arrow_schema(output, timezone="UTC")
        passthrough = [f.name for f in output.fields if f.name not in VERDICT_COLUMNS]
        keep_data = "data" in arrow_schema.names
        data_type = arrow_schema.field("data").type if keep_data else None
        convert = converter(expected_json) if keep_data else None
        validate = validator.validate
        for batch in batches:
            verdicts = [validate(value) for value in batch.column("value").to_pylist()]
            if not verdicts:
                continue
            # Transposing the verdict tuples runs in C; only the outcome needs a pass of its own.
            reasons, messages, schema_ids, data = (list(c) for c in zip(*verdicts, strict=True))
            columns = [
                batch.column(name).cast(arrow_schema.field(name).type) for name in passthrough
            ]
            columns += [
                pa.array([VALID if r is None else INVALID for r in reasons], pa.string()),
                pa.array(reasons, pa.string()),
                pa.array(messages, pa.string()),
                pa.array(schema_ids, pa.int32()),
            ]
            if keep_data:
                if convert is not None:
                    data = [None if d is None else convert(d) for d in data]
                columns.append(pa.array(data, data_type))
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)

    return run


def count_verdicts(
    registry_url: str, expected: RegisteredSchema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a run with no record outputs: source rows in, counts out.

    Each Arrow batch becomes a few rows (one per partition, outcome and reason, with the first
    and last offset), grouped by Arrow in C++; only those cross back to the JVM.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reasons_of = cached_validator(registry_url, expected).reasons
        for batch in batches:
            reasons = reasons_of(batch.column("value").to_pylist())
            if not reasons:
                continue
            table = pa.table(
                {
                    "topic": batch.column("topic"),
                    "partition": batch.column("partition"),
                    "reason": pa.array(reasons, pa.string()),
                    "offset": batch.column("offset"),
                }
            )
            grouped = table.group_by(["topic", "partition", "reason"], use_threads=False).aggregate(
                [("offset", "count"), ("offset", "min"), ("offset", "max")]
            )
            reason_column = grouped.column("reason")
            yield pa.RecordBatch.from_arrays(
                [
                    grouped.column("topic").combine_chunks(),
                    grouped.column("partition").combine_chunks(),
                    pa.array(
                        [VALID if r is None else INVALID for r in reason_column.to_pylist()],
                        pa.string(),
                    ),
                    reason_column.combine_chunks(),
                    grouped.column("offset_count").combine_chunks().cast(pa.int64()),
                    grouped.column("offset_min").combine_chunks(),
                    grouped.column("offset_max").combine_chunks(),
                ],
                schema=to_arrow_schema(COUNT_SCHEMA),
            )

    return run


def produce_partition(
    brokers: list[str], topic: str, dead_letter: bool
) -> Callable[[Iterable[Any]], None]:
    """The ``foreachPartition`` function producing rows to ``topic``.

    Uses the SDK's idempotent producer (a retried batch is stored once). Every record gets the
    ``headwater.source.*`` headers (its dedup key); dead letters also get the reason headers. Any
    record not acknowledged fails the task, so the driver never records the range as produced.
    """

    def run(rows: Iterable[Any]) -> None:
        from headwater.producer import Producer

        failures: list[BaseException] = []

        def delivered(error: BaseException | None, _metadata: object) -> None:
            if error is not None:
                failures.append(error)

        producer = Producer(
            {"bootstrap.servers": ",".join(brokers), "enable.idempotence": True, "acks": "all"}
        )
        try:
            for row in rows:
                headers = [(h["key"], h["value"]) for h in row["headers"] or []]
                if dead_letter:
                    headers += dead_letter_headers(
                        row["reason"],
                        row["message"],
                        row["topic"],
                        row["partition"],
                        row["offset"],
                        row["schema_id"],
                    )
                else:
                    headers += source_headers(row["topic"], row["partition"], row["offset"])
                producer.produce(
                    topic,
                    value=None if row["value"] is None else bytes(row["value"]),
                    key=None if row["key"] is None else bytes(row["key"]),
                    headers=headers,
                    on_delivery=delivered,
                )
            unfinished = producer.flush(120.0)
        finally:
            producer.close(10.0)
        if unfinished or failures:
            raise RuntimeError(
                f"producing to {topic}: {unfinished} batch(es) unfinished, "
                f"{len(failures)} record(s) failed (first: {failures[:1]})"
            )

    return run


def source_headers(topic: str, partition: int, offset: int) -> list[tuple[str, bytes | None]]:
    """Where a produced record came from: the deterministic key consumers can dedup on."""
    return [
        (SOURCE_TOPIC_HEADER, topic.encode()),
        (SOURCE_PARTITION_HEADER, str(partition).encode()),
        (SOURCE_OFFSET_HEADER, str(offset).encode()),
    ]


def dead_letter_headers(
    reason: str,
    message: str,
    topic: str,
    partition: int,
    offset: int,
    schema_id: int | None,
) -> list[tuple[str, bytes | None]]:
    """Headers that say why a record is in the dead-letter topic and where it came from."""
    headers: list[tuple[str, bytes | None]] = [
        (REASON_HEADER, reason.encode()),
        (MESSAGE_HEADER, message.encode()),
        *source_headers(topic, partition, offset),
    ]
    if schema_id is not None:
        headers.append((SCHEMA_ID_HEADER, str(schema_id).encode()))
    return headers


# --- driver side -----------------------------------------------------------------------------


VERDICT_COLUMNS = ("outcome", "reason", "message", "schema_id", "data")


def output_schema(
    expected: RegisteredSchema, passthrough: Iterable[str], keep_data: bool
) -> StructType:
    """The validation step's rows: the ``passthrough`` source columns, the verdict, and (with
    ``keep_data``) ``data`` in the expected schema's shape."""
    fields = [SOURCE_SCHEMA[name] for name in passthrough]
    fields += [
        StructField("outcome", StringType(), False),
        StructField("reason", StringType(), True),
        StructField("message", StringType(), True),
        StructField("schema_id", IntegerType(), True),
    ]
    if keep_data:
        data_type, _ = spark_type(json.loads(expected.schema_str))
        fields.append(StructField("data", data_type, True))
    return StructType(fields)


def range_id(ranges: Iterable[OffsetRange]) -> str:
    """A short digest naming a set of source ranges (the Parquet ``range`` partition)."""
    text = json.dumps(
        sorted([r.topic, int(r.partition), int(r.start), int(r.end)] for r in ranges if r.size)
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ranges_from_counts(rows: Iterable[CountRow]) -> list[OffsetRange]:
    """The source ranges a set of aggregate rows covers: ``[first, last + 1)`` per partition."""
    spans: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        span = spans.setdefault((row.topic, row.partition), [row.first_offset, row.last_offset])
        span[0] = min(span[0], row.first_offset)
        span[1] = max(span[1], row.last_offset)
    return [
        OffsetRange(topic, PartitionId(p), Offset(first), Offset(last + 1))
        for (topic, p), (first, last) in sorted(spans.items())
    ]


class ValidationJob:
    """One configured run (batch or streaming) against one Spark session."""

    def __init__(self, spark: SparkSession, config: JobConfig) -> None:
        self.spark = spark
        self.config = config
        self.summary = Summary()
        # The job's fused read path (a run with no record outputs); idempotent per session.
        spark.dataSource.register(HeadwaterVerdictSource)

    def expected_schema(self) -> RegisteredSchema:
        version = self.config.expected_version
        return SchemaRegistry(self.config.registry).version(
            self.config.expected_subject, "latest" if version is None else version
        )

    def resolve_ranges(self) -> list[OffsetRange]:
        """The batch's concrete offset range, fixed once on the driver (so it can be named)."""
        c = self.config
        with TopicLog(c.brokers) as log:
            return resolve_ranges(log, [c.topic], c.starting_offsets, c.ending_offsets)

    def _reader_options(self) -> dict[str, str]:
        c = self.config
        options = {
            "brokers": ",".join(c.brokers),
            "subscribe": c.topic,
            "maxRecordsPerPartition": str(c.max_records_per_partition),
            "minPartitions": str(c.min_partitions),
        }
        if c.max_records_per_trigger:
            options["maxRecordsPerTrigger"] = str(c.max_records_per_trigger)
        options.update(c.source_options)
        return options

    def validate(self, source: DataFrame, expected: RegisteredSchema) -> DataFrame:
        """Verdicts for every source row, carrying only the columns the outputs use.

        Every column crossing between the JVM and the Python workers is converted row by row
        (headers, an array of structs, most of all), so what no output needs is dropped first.
        """
        c = self.config
        passthrough = ["topic", "partition", "offset"]
        if c.output_path:
            passthrough += ["timestamp"]
        if c.target_topic or c.dead_letter_topic:
            passthrough += ["key", "value", "headers"]
        inputs = [*passthrough, *([] if "value" in passthrough else ["value"])]
        schema = output_schema(expected, passthrough, keep_data=bool(c.output_path))
        return source.select(*inputs).mapInArrow(
            validate_batches(c.registry, expected, schema), schema
        )

    # Batch ---------------------------------------------------------------------------------

    def run_batch(self) -> Summary:
        started = time.monotonic()
        expected = self.expected_schema()
        ranges = self.resolve_ranges()
        offsets_start = {(r.topic, r.partition): r.start for r in ranges}
        offsets_end = {(r.topic, r.partition): r.end for r in ranges}
        c = self.config
        fused = not (c.output_path or c.target_topic or c.dead_letter_topic)
        reader = (
            self.spark.read.format(VERDICT_FORMAT if fused else "headwater")
            .options(**self._reader_options())
            .option("startingOffsets", json.dumps(to_json_offsets(offsets_start)))
            .option("endingOffsets", json.dumps(to_json_offsets(offsets_end)))
        )
        if fused:
            # Counts only: fetch, decode and validate in one pass inside the source's read().
            reader = reader.option("registry", c.registry).option(
                "expectedSchema", expected_option(expected)
            )
            # A few partial-count rows per Arrow batch: collected as they are and folded on the
            # driver (Summary.add sums them), which saves a shuffle stage per run.
            self._add_counts(
                [
                    CountRow(
                        r["topic"],
                        r["partition"],
                        r["outcome"],
                        r["reason"],
                        r["n"],
                        r["first"],
                        r["last"],
                    )
                    for r in reader.load().collect()
                ]
            )
        else:
            self._process(reader.load(), expected, ranges)
        self.summary.elapsed_s = time.monotonic() - started
        self._describe(expected, ranges)
        self._write_summary()
        return self.summary

    def _process(
        self, source: DataFrame, expected: RegisteredSchema, ranges: list[OffsetRange] | None
    ) -> None:
        """Validate ``source`` (a batch run or one micro-batch), count, write every output."""
        c = self.config
        if not (c.output_path or c.target_topic or c.dead_letter_topic):
            counts_only = source.select("topic", "partition", "offset", "value").mapInArrow(
                count_verdicts(c.registry, expected), COUNT_SCHEMA
            )
            self._add_counts(self._counts(counts_only, "n"))
            return
        # Every output reads the same validation pass instead of fetching and decoding again.
        validated = self.validate(source, expected).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = self._counts(validated, None)
            if not counts:
                return
            covered = ranges if ranges is not None else ranges_from_counts(counts)
            self._add_counts(counts)
            if c.output_path:
                self._write_parquet(validated.where(sf.col("outcome") == VALID), covered)
            if c.target_topic:
                self._produce(validated.where(sf.col("outcome") == VALID), c.target_topic, covered)
            if c.dead_letter_topic:
                self._produce(
                    validated.where(sf.col("outcome") == INVALID), c.dead_letter_topic, covered
                )
        finally:
            validated.unpersist()

    def _add_counts(self, counts: list[CountRow]) -> None:
        if counts:
            self.summary.add(counts)

    @staticmethod
    def _counts(rows: DataFrame, count_column: str | None) -> list[CountRow]:
        """Counts and offsets per (topic, partition, outcome, reason) of verdict rows, or of
        partial counts already made on the executors (``count_column`` names their count)."""
        first = "first" if count_column else "offset"
        last = "last" if count_column else "offset"
        total = sf.sum(count_column) if count_column else sf.count(sf.lit(1))
        aggregated = (
            rows.groupBy("topic", "partition", "outcome", "reason")
            .agg(
                total.alias("n"),
                sf.min(first).alias("first"),
                sf.max(last).alias("last"),
            )
            .collect()
        )
        return [
            CountRow(
                r["topic"], r["partition"], r["outcome"], r["reason"], r["n"], r["first"], r["last"]
            )
            for r in aggregated
        ]

    def _write_parquet(self, valid: DataFrame, ranges: list[OffsetRange]) -> None:
        assert self.config.output_path is not None
        data_type = valid.schema["data"].dataType
        data_columns: list[Column] = (
            [sf.col(f"data.`{f.name}`").alias(f.name) for f in data_type.fields]
            if isinstance(data_type, StructType)
            else [sf.col("data").alias("value")]
        )
        out = valid.select(
            *data_columns,
            sf.col("topic").alias("_topic"),
            sf.col("partition").alias("_partition"),
            sf.col("offset").alias("_offset"),
            sf.col("timestamp").alias("_timestamp"),
            sf.col("schema_id").alias("_schema_id"),
            sf.to_date("timestamp").cast("string").alias("date"),
            sf.lit(range_id(ranges)).alias("range"),
        )
        (
            out.write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("date", "range")
            .parquet(self.config.output_path)
        )
        self.summary.outputs["parquet"] = self.config.output_path

    def _produce(self, rows: DataFrame, topic: str, ranges: list[OffsetRange]) -> None:
        ledger = RangeLedger(self.config.state_dir, topic)
        condition = _outside(ledger.recorded())
        if condition is not None:
            rows = rows.where(condition)
        rows.select(
            "topic",
            "partition",
            "offset",
            "key",
            "value",
            "headers",
            "reason",
            "message",
            "schema_id",
        ).foreachPartition(
            produce_partition(
                self.config.brokers, topic, dead_letter=topic == self.config.dead_letter_topic
            )
        )
        ledger.record(ranges)
        self.summary.outputs.setdefault("topics", [])
        if topic not in self.summary.outputs["topics"]:
            self.summary.outputs["topics"].append(topic)

    def _describe(self, expected: RegisteredSchema, ranges: list[OffsetRange] | None) -> None:
        self.summary.outputs["expected_schema"] = (
            f"{expected.subject} v{expected.version} (id {expected.schema_id})"
        )
        if ranges is not None:
            self.summary.outputs["range"] = range_id(ranges)

    def _write_summary(self) -> None:
        if self.config.summary_path:
            self.summary.outputs["summary"] = self.config.summary_path
            self.summary.write(self.config.summary_path)

    # Streaming -----------------------------------------------------------------------------

    def run_stream(self) -> Summary:
        """Micro-batches until caught up (availableNow) or the timeout, from the checkpoint on."""
        c = self.config
        if not c.checkpoint:
            raise ValueError("streaming mode needs a checkpoint location (--checkpoint)")
        started = time.monotonic()
        expected = self.expected_schema()
        source = (
            self.spark.readStream.format("headwater")
            .options(**self._reader_options())
            .option("startingOffsets", c.starting_offsets)
            .load()
        )

        def each_batch(batch: DataFrame, batch_id: int) -> None:
            self._process(batch, expected, None)

        writer = source.writeStream.foreachBatch(each_batch).option(
            "checkpointLocation", c.checkpoint
        )
        writer = (
            writer.trigger(availableNow=True)
            if c.available_now
            else writer.trigger(processingTime=f"{c.trigger_seconds} seconds")
        )
        query: StreamingQuery = writer.start()
        try:
            query.awaitTermination(None if c.timeout_seconds is None else int(c.timeout_seconds))
        except KeyboardInterrupt:
            pass  # Ctrl-C ends a continuous run; the summary still covers what was processed
        finally:
            if query.isActive:
                query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        self.summary.elapsed_s = time.monotonic() - started
        self._describe(expected, None)
        self._write_summary()
        return self.summary


def _outside(recorded: list[OffsetRange]) -> Column | None:
    """A filter keeping rows whose (topic, partition, offset) is in no recorded range."""
    condition: Column | None = None
    for r in recorded:
        inside = (
            (sf.col("topic") == r.topic)
            & (sf.col("partition") == int(r.partition))
            & (sf.col("offset") >= int(r.start))
            & (sf.col("offset") < int(r.end))
        )
        condition = inside if condition is None else condition | inside
    return None if condition is None else ~condition
