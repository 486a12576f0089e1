"""The ``headwater`` PySpark Python Data Source: batch and streaming reads of topic partitions.

Usage::

    spark.dataSource.register(HeadwaterDataSource)
    df = (spark.read.format("headwater")
          .option("brokers", "http://127.0.0.1:8082")
          .option("subscribe", "orders")
          .option("startingOffsets", "earliest")
          .option("endingOffsets", "latest")
          .load())

Rows: ``topic, partition, offset, timestamp, key, value, headers`` (:data:`SOURCE_SCHEMA_DDL`).

Options (names as Spark's Kafka source where one exists):

- ``brokers`` (or ``bootstrap.servers``): comma-separated broker URLs. Required.
- ``subscribe`` (or ``topic``): comma-separated topic names. Required.
- ``startingOffsets``: ``earliest`` | ``latest`` | JSON ``{"t": {"0": 23, "1": -2}}``. Default
  ``earliest`` for batch, ``latest`` for streaming (only for a new query: a restarted query resumes
  from its checkpoint).
- ``endingOffsets`` (batch only): ``latest`` (default) | JSON, ``-1`` = latest.
- ``maxRecordsPerPartition``: most records one Spark task reads (default 200000); larger offset
  ranges are split so every core works.
- ``minPartitions``: at least this many Spark partitions (ranges are halved until reached).
- ``maxRecordsPerTrigger`` (streaming): most records per micro-batch, shared fairly across
  partitions; it applies under ``Trigger.AvailableNow`` too (several batches up to the target),
  but a limit Spark passes itself (``ReadAllAvailable`` for ``Trigger.Once``) wins.
- ``rowsPerBatch``: rows per Arrow batch handed to Spark (default 10000).

Where code runs: ``DataSource.__init__``/``schema``/``reader``/``streamReader``, ``partitions``,
``initialOffset``, ``latestOffset`` and ``commit`` run on the driver; ``read`` runs on executors and
builds its own HTTP client there. Everything the executors receive (the reader object, its
:class:`RangePartition` list) is plain picklable data.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from typing_extensions import override

from headwater_spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    from_json_offsets,
    limit_ends,
    parse_offset_spec,
    split_ranges,
    to_json_offsets,
)
from headwater_spark.topic_log import TopicLog

SOURCE_SCHEMA_DDL = (
    "topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, key BINARY, "
    "value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
"""The same rows as a StructType (built without a running session)."""

DEFAULT_MAX_RECORDS_PER_PARTITION = 200_000
DEFAULT_ROWS_PER_BATCH = 10_000


class SourceOptions:
    """The source's options, parsed once on the driver (picklable: plain values only)."""

    def __init__(self, options: dict[str, str]) -> None:
        lowered = {k.lower(): v for k, v in options.items()}
        brokers = lowered.get("brokers") or lowered.get("bootstrap.servers") or ""
        self.brokers = [b.strip() for b in brokers.split(",") if b.strip()]
        topics = lowered.get("subscribe") or lowered.get("topic") or ""
        self.topics = [t.strip() for t in topics.split(",") if t.strip()]
        if not self.brokers:
            raise ValueError("the headwater source needs option 'brokers' (broker URLs)")
        if not self.topics:
            raise ValueError("the headwater source needs option 'subscribe' (topic names)")
        self.starting = lowered.get("startingoffsets")
        self.ending = lowered.get("endingoffsets")
        self.max_records_per_partition = _positive(
            lowered, "maxrecordsperpartition", DEFAULT_MAX_RECORDS_PER_PARTITION
        )
        self.min_partitions = _positive(lowered, "minpartitions", 1)
        self.rows_per_batch = _positive(lowered, "rowsperbatch", DEFAULT_ROWS_PER_BATCH)
        limit = lowered.get("maxrecordspertrigger")
        self.max_records_per_trigger = (
            _positive(lowered, "maxrecordspertrigger", 1) if limit else None
        )

    def topic_log(self) -> TopicLog:
        return TopicLog(self.brokers)


def _positive(options: dict[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"option {name} must be >= 1, got {value}")
    return value


def resolve_ranges(
    log: TopicLog, topics: Sequence[str], starting: str | None, ending: str | None
) -> list[OffsetRange]:
    """Concrete ``[start, end)`` per partition of ``topics`` for batch offset options (driver)."""
    start_spec = parse_offset_spec(starting, EARLIEST)
    end_spec = parse_offset_spec(ending, LATEST)
    return [
        OffsetRange(
            topic,
            partition,
            start_spec.resolve((topic, partition), beginning, end),
            end_spec.resolve((topic, partition), beginning, end),
        )
        for (topic, partition), (beginning, end) in sorted(log.log_ranges(topics).items())
    ]


class RangePartition(InputPartition):
    """One Spark task's work: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


def _read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side of both readers: stream one range as Arrow batches."""
    if not isinstance(partition, RangePartition):
        # Spark reads one placeholder partition when ``partitions()`` planned none.
        return
    r = partition.range
    with options.topic_log() as log:
        yield from log.read_range(r.topic, r.partition, r.start, r.end, options.rows_per_batch)


class HeadwaterDataSource(DataSource):
    """Format ``headwater``: topic partitions of a Headwater cluster as a DataFrame or stream."""

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return HeadwaterBatchReader(SourceOptions(dict(self.options)))

    @override
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HeadwaterStreamReader(SourceOptions(dict(self.options)))


class HeadwaterBatchReader(DataSourceReader):
    """Batch read of a fixed offset range, resolved once on the driver when the reader is built.

    Resolving at construction (not lazily in ``partitions``) pins ``latest`` to one moment, so
    every action on the DataFrame sees the same records.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        with options.topic_log() as log:
            self.ranges = resolve_ranges(log, options.topics, options.starting, options.ending)

    def partitions(self) -> Sequence[InputPartition]:
        pieces = split_ranges(
            self.ranges, self.options.max_records_per_partition, self.options.min_partitions
        )
        return [RangePartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_partition(self.options, partition)


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition positions ``{"topic": {"0": next_offset}}``.

    Spark checkpoints the end offset of each planned micro-batch before running it and calls
    ``commit`` after, so a restarted query replans the same last batch and continues from its end:
    no record is skipped or read twice. Partitions added to a topic later start at their beginning.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now_target: PartitionOffsets | None = None

    def _available(self) -> tuple[PartitionOffsets, PartitionOffsets]:
        with self.options.topic_log() as log:
            ranges = log.log_ranges(self.options.topics)
        beginnings = {tp: r[0] for tp, r in ranges.items()}
        ends = {tp: r[1] for tp, r in ranges.items()}
        return beginnings, ends

    @override
    def initialOffset(self) -> dict[str, Any]:
        starting = parse_offset_spec(self.options.starting, LATEST)
        beginnings, ends = self._available()
        return to_json_offsets(
            {tp: starting.resolve(tp, beginnings[tp], ends[tp]) for tp in sorted(ends)}
        )

    @override
    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    @override
    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self._available()[1]

    @override
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        positions = from_json_offsets(start)
        beginnings, ends = self._available()
        if self._available_now_target is not None:
            # Under availableNow, data arriving after the query started is left for the next run.
            target = self._available_now_target
            ends = {tp: min(end, target.get(tp, beginnings[tp])) for tp, end in ends.items()}
        for tp in ends:
            positions.setdefault(tp, beginnings[tp])
        ends = {tp: max(end, positions[tp]) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = limit_ends(positions, ends, limit.max_rows)
        return to_json_offsets(ends)

    @override
    def reportLatestOffset(self) -> dict[str, Any]:
        return to_json_offsets(self._available()[1])

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts = from_json_offsets(start)
        ends = from_json_offsets(end)
        if any(tp not in starts for tp in ends):
            # A partition absent from ``start`` appeared during this batch: read it from its
            # first stored offset, as latestOffset assumed when it planned the batch's end.
            beginnings = self._available()[0]
            for tp in ends:
                starts.setdefault(tp, beginnings.get(tp, ends[tp]))
        ranges = [
            OffsetRange(topic, partition, starts[(topic, partition)], end_offset)
            for (topic, partition), end_offset in sorted(ends.items())
        ]
        pieces = split_ranges(ranges, self.options.max_records_per_partition)
        return [RangePartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: positions live in Spark's checkpoint, not in the brokers."""
