"""The validation pipeline's driver: resolve expectations and ranges, plan, write outputs, gate.

Everything here runs on the driver. The per-record work runs on executors, in
:mod:`headwater_spark.verdicts` (inside ``mapInArrow`` or the fused source
:mod:`headwater_spark.verdict_source`) and :mod:`headwater_spark.topic_output` (inside
``foreachPartition``); outputs' file handling is :mod:`headwater_spark.parquet_output`'s.

Outputs and what a re-run over the same range guarantees:

- Parquet (``output_path``): valid records decoded into the expected schema's columns plus
  ``_topic, _partition, _offset, _timestamp, _schema_id``, by ``date`` (UTC, from the record
  timestamp), in files named after their source range: a re-run of a batch range, or a replayed
  micro-batch, replaces exactly its own files (:mod:`headwater_spark.parquet_output`).
- Topic outputs (dead-letter topic for invalid records, optional target topic for valid ones):
  a source range is recorded in the ledger (:mod:`headwater_spark.ledger`, on any Hadoop path)
  once its produce succeeded, and records in recorded ranges are not produced again. A run that
  dies mid-produce may leave some of its records produced without a ledger entry; the re-run then
  produces those again, each still carrying its ``headwater.source.*`` headers, the
  deterministic key consumers can dedup on.
- The quality gate: with ``max_invalid`` / ``max_invalid_ratio`` the summary says whether the run
  passed; the command line exits non-zero when it did not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DataType, StructType

from headwater.types import Offset, PartitionId
from headwater_spark.files import HadoopFiles
from headwater_spark.ledger import RangeLedger
from headwater_spark.offsets import OffsetRange, to_json_offsets
from headwater_spark.options import SourceOptions
from headwater_spark.parquet_output import data_columns, range_id, with_source_columns, write_range
from headwater_spark.schemas import NamingStrategy, SchemaResolver, subject_name
from headwater_spark.source import plan_batch
from headwater_spark.summary import CountRow, QualityGate, Summary
from headwater_spark.topic_log import TopicLog
from headwater_spark.topic_output import OUTPUT_COLUMNS, produce_partition
from headwater_spark.validation import INVALID, VALID
from headwater_spark.verdict_source import FORMAT as VERDICT_FORMAT
from headwater_spark.verdict_source import HeadwaterVerdictSource
from headwater_spark.verdicts import (
    COUNT_SCHEMA,
    Expectation,
    count_verdicts,
    expected_json,
    output_schema,
    type_field,
    validate_batches,
)


@dataclass
class JobConfig:
    """Everything one run needs; built from the command line by ``headwater_spark.validate``."""

    brokers: list[str]
    registry: str
    topic: str
    subject: str | None = None
    expected_version: int | None = None
    naming_strategy: NamingStrategy = NamingStrategy.TOPIC_NAME
    record_types: list[str] = field(default_factory=list)
    validate_keys: bool = False
    starting_offsets: str = "earliest"
    ending_offsets: str = "latest"
    fail_on_data_loss: bool = True
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
    max_records_per_partition: int = 1_000_000
    min_partitions: int = 1
    max_invalid: int | None = None
    max_invalid_ratio: float | None = None
    source_options: dict[str, str] = field(default_factory=dict)

    @property
    def expected_subject(self) -> str:
        return self.subject or f"{self.topic}-value"


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


def resolve_expectation(resolver: SchemaResolver, config: JobConfig, part: str) -> Expectation:
    """Which schema(s) the ``value`` or ``key`` of every record should have (driver)."""
    c = config
    version: int | str = "latest" if c.expected_version is None else c.expected_version
    if part == "key":
        # Keys use the TopicName strategy: one key schema per topic.
        registered = resolver.registry.version(
            subject_name(NamingStrategy.TOPIC_NAME, c.topic, True, None)
        )
        return Expectation("key", NamingStrategy.TOPIC_NAME, single=registered)
    if not c.naming_strategy.per_record_type:
        return Expectation(
            "value",
            c.naming_strategy,
            single=resolver.registry.version(c.expected_subject, version),
        )
    names = list(c.record_types)
    if not names and c.naming_strategy is NamingStrategy.TOPIC_RECORD_NAME:
        # Every record type registered for this topic: subjects "<topic>-<record full name>".
        prefix = f"{c.topic}-"
        names = [
            subject[len(prefix) :]
            for subject in resolver.registry.client.get_subjects()
            if subject.startswith(prefix) and subject not in (f"{c.topic}-key", f"{c.topic}-value")
        ]
    if not names:
        raise ValueError(
            f"the {c.naming_strategy.value} strategy needs the record types to expect "
            "(--record-types a.B,c.D)"
        )
    by_name = {
        name: resolver.registry.version(
            subject_name(c.naming_strategy, c.topic, False, name), version
        )
        for name in sorted(names)
    }
    return Expectation("value", c.naming_strategy, by_name=by_name)


@dataclass(frozen=True)
class ExpectedSchemas:
    """What every record is checked against, read from the registry before Spark starts.

    Needs no Spark session (the ``data`` column's type is built in Python), so the command line
    resolves it first: a subject the registry does not have, or a registry that does not answer,
    fails the run in about a second instead of after the JVM has started.
    """

    value: Expectation
    key: Expectation | None = None
    data_type: DataType | None = None  # the Parquet output's ``data`` column; None without one

    @classmethod
    def resolve(cls, config: JobConfig) -> ExpectedSchemas:
        """The registry's typed error (e.g. ``SubjectNotFoundError``) or httpx's if absent."""
        resolver = SchemaResolver.of(config.registry)
        value = resolve_expectation(resolver, config, "value")
        key = resolve_expectation(resolver, config, "key") if config.validate_keys else None
        return cls(value, key, value.data_type(resolver) if config.output_path else None)


class ValidationJob:
    """One configured run (batch or streaming) against one Spark session."""

    def __init__(
        self, spark: SparkSession, config: JobConfig, expected: ExpectedSchemas | None = None
    ) -> None:
        """``expected`` as :meth:`ExpectedSchemas.resolve` gives it; resolved here when None."""
        self.spark = spark
        self.config = config
        self.files = HadoopFiles(spark)
        self.summary = Summary(
            gate=(
                QualityGate(config.max_invalid, config.max_invalid_ratio)
                if config.max_invalid is not None or config.max_invalid_ratio is not None
                else None
            )
        )
        # The job's fused read path (a run with no record outputs); idempotent per session.
        spark.dataSource.register(HeadwaterVerdictSource)
        if expected is None:
            expected = ExpectedSchemas.resolve(config)
        self.value = expected.value
        self.key = expected.key
        self.data_type = expected.data_type

    @property
    def _has_record_outputs(self) -> bool:
        c = self.config
        return bool(c.output_path or c.target_topic or c.dead_letter_topic)

    def _reader_options(self) -> dict[str, str]:
        c = self.config
        options = {
            "kafka.bootstrap.servers": ",".join(c.brokers),
            "subscribe": c.topic,
            "maxRecordsPerPartition": str(c.max_records_per_partition),
            "minPartitions": str(max(1, c.min_partitions)),
            "failOnDataLoss": str(c.fail_on_data_loss).lower(),
        }
        if self._has_record_outputs:
            options["includeHeaders"] = "true"
        if c.max_records_per_trigger:
            options["maxOffsetsPerTrigger"] = str(c.max_records_per_trigger)
        options.update(c.source_options)
        return options

    def validate(self, source: DataFrame) -> DataFrame:
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
        inputs = [*passthrough]
        for needed in ("value", *(("key",) if self.key is not None else ())):
            if needed not in inputs:
                inputs.append(needed)
        schema = output_schema(passthrough, self.data_type)
        return source.select(*inputs).mapInArrow(
            validate_batches(c.registry, self.value, self.key, schema), schema
        )

    # Batch ---------------------------------------------------------------------------------

    def resolve_ranges(self) -> list[OffsetRange]:
        """The batch's concrete offset range, fixed once on the driver (so it can be named)."""
        c = self.config
        options = SourceOptions.parse(
            {
                **self._reader_options(),
                "startingOffsets": c.starting_offsets,
                "endingOffsets": c.ending_offsets,
            },
            streaming=False,
        )
        with TopicLog(c.brokers) as log:
            return plan_batch(log, options)

    def run_batch(self) -> Summary:
        started = time.monotonic()
        ranges = self.resolve_ranges()
        offsets_start = {(r.topic, r.partition): r.start for r in ranges}
        offsets_end = {(r.topic, r.partition): r.end for r in ranges}
        c = self.config
        fused = not self._has_record_outputs
        reader = (
            self.spark.read.format(VERDICT_FORMAT if fused else "headwater")
            .options(**self._reader_options())
            .option("startingOffsets", json.dumps(to_json_offsets(offsets_start)))
            .option("endingOffsets", json.dumps(to_json_offsets(offsets_end)))
        )
        if fused:
            # Counts only: fetch, decode and validate in one pass inside the source's read().
            reader = reader.option("registry", c.registry).option(
                "valueExpectation", expected_json(self.value)
            )
            if self.key is not None:
                reader = reader.option("keyExpectation", expected_json(self.key))
            # A few partial-count rows per Arrow batch: collected as they are and folded on the
            # driver (Summary.add sums them), which saves a shuffle stage per run.
            self._add_counts([_count_row(r) for r in reader.load().collect()])
        else:
            self._process(reader.load(), ranges)
        self.summary.elapsed_s = time.monotonic() - started
        self._describe(ranges)
        self._write_summary()
        return self.summary

    def _process(self, source: DataFrame, ranges: list[OffsetRange] | None) -> None:
        """Validate ``source`` (a batch run or one micro-batch), count, write every output."""
        c = self.config
        if not self._has_record_outputs:
            counts_only = source.select("topic", "partition", "offset", "key", "value").mapInArrow(
                count_verdicts(c.registry, self.value, self.key), COUNT_SCHEMA
            )
            self._add_counts(self._counts(counts_only, partial=True))
            return
        # Every output reads the same validation pass instead of fetching and decoding again.
        validated = self.validate(source).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = self._counts(validated, partial=False)
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
    def _counts(rows: DataFrame, *, partial: bool) -> list[CountRow]:
        """Counts, offsets and a sample message per (topic, partition, outcome, reason, writer
        schema id) of verdict rows, or of partial counts already made on the executors."""
        first = "first" if partial else "offset"
        last = "last" if partial else "offset"
        total = sf.sum("n") if partial else sf.count(sf.lit(1))
        aggregated = (
            rows.groupBy("topic", "partition", "outcome", "reason", "schema_id")
            .agg(
                total.alias("n"),
                sf.min(first).alias("first"),
                sf.max(last).alias("last"),
                sf.min_by("message", first).alias("message"),
            )
            .collect()
        )
        return [_count_row(r) for r in aggregated]

    def _write_parquet(self, valid: DataFrame, ranges: list[OffsetRange]) -> None:
        output = self.config.output_path
        assert output is not None
        assert self.data_type is not None
        tag = range_id(ranges)
        if self.value.single is not None:
            write_range(
                self.files,
                with_source_columns(valid, data_columns(self.data_type)),
                output,
                tag,
            )
        else:
            # One dataset per record type: their columns differ.
            assert isinstance(self.data_type, StructType)
            for name in sorted(self.value.by_name):
                column = type_field(name)
                of_type = valid.where(sf.col(f"data.`{column}`").isNotNull())
                rows = with_source_columns(
                    of_type, data_columns(self.data_type[column].dataType, f"data.`{column}`")
                )
                write_range(self.files, rows, self.files.join(output, name), tag)
        self.summary.outputs["parquet"] = output

    def _produce(self, rows: DataFrame, topic: str, ranges: list[OffsetRange]) -> None:
        ledger = RangeLedger(self.files, self.config.state_dir, topic)
        condition = _outside(ledger.recorded())
        if condition is not None:
            rows = rows.where(condition)
        rows.select(*OUTPUT_COLUMNS).foreachPartition(
            produce_partition(
                self.config.brokers, topic, dead_letter=topic == self.config.dead_letter_topic
            )
        )
        ledger.record(ranges)
        self.summary.outputs.setdefault("topics", [])
        if topic not in self.summary.outputs["topics"]:
            self.summary.outputs["topics"].append(topic)

    def _describe(self, ranges: list[OffsetRange] | None) -> None:
        self.summary.outputs["expected_schema"] = self.value.describe()
        if self.key is not None:
            self.summary.outputs["expected_key_schema"] = self.key.describe()
        if ranges is not None:
            self.summary.outputs["range"] = range_id(ranges)

    def _write_summary(self) -> None:
        if self.config.summary_path:
            self.summary.outputs["summary"] = self.config.summary_path
            self.summary.write(self.files, self.config.summary_path)

    # Streaming -----------------------------------------------------------------------------

    def run_stream(self) -> Summary:
        """Micro-batches until caught up (availableNow) or the timeout, from the checkpoint on."""
        c = self.config
        if not c.checkpoint:
            raise ValueError("streaming mode needs a checkpoint location (--checkpoint)")
        started = time.monotonic()
        source = (
            self.spark.readStream.format("headwater")
            .options(**self._reader_options())
            .option("startingOffsets", c.starting_offsets)
            .load()
        )

        def each_batch(batch: DataFrame, batch_id: int) -> None:
            self._process(batch, None)

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
        self._describe(None)
        self._write_summary()
        return self.summary


def _count_row(r: Row) -> CountRow:
    get = r.__getitem__
    return CountRow(
        get("topic"),
        get("partition"),
        get("outcome"),
        get("reason"),
        get("n"),
        get("first"),
        get("last"),
        get("schema_id"),
        get("message"),
    )


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
