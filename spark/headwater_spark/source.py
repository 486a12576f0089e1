"""The ``headwater`` PySpark Python Data Source: batch and streaming reads of topic partitions.

A drop-in for Spark's Kafka source: the same option names and rules, the same rows::

    spark.dataSource.register(HeadwaterDataSource)   # or install headwater[spark]: see below
    df = (spark.read.format("headwater")
          .option("kafka.bootstrap.servers", "http://127.0.0.1:8082")
          .option("subscribe", "orders")
          .option("startingOffsets", "earliest")
          .load())

Rows (:func:`source_schema`): ``key BINARY, value BINARY, topic STRING, partition INT,
offset BIGINT, timestamp TIMESTAMP, timestampType INT`` and, with ``includeHeaders``,
``headers ARRAY<STRUCT<key: STRING, value: BINARY>>``. Options are parsed strictly by
:mod:`headwater_spark.options` and offsets checked against the log by
:mod:`headwater_spark.offsets`; docs/spark.md has the table. The same format writes
(:mod:`headwater_spark.sink`).

Where code runs: ``DataSource.__init__``/``schema``/``reader``/``streamReader``, ``partitions``,
``initialOffset``, ``latestOffset`` and ``commit`` run on the driver; ``read`` runs on executors
and builds its own HTTP client there, yielding Arrow record batches (no per-row Python objects
cross to the JVM). Everything the executors receive (the reader, its :class:`RangePartition`
list) is plain picklable data. Reads go through the SDK's BrokerClient, which routes each
partition to where it is served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
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

from headwater.types import Offset
from headwater_spark.offsets import (
    DATA_LOSS_HINT,
    EARLIEST,
    LATEST,
    DataLossError,
    LogRanges,
    OffsetRange,
    OffsetSpec,
    PartitionOffsets,
    check_order,
    from_json_offsets,
    limit_ends,
    parse_offset_spec,
    parse_timestamp_spec,
    resolve_ends,
    resolve_starts,
    split_ranges,
    to_json_offsets,
)
from headwater_spark.options import SourceOptions
from headwater_spark.topic_log import TopicLog

log = logging.getLogger("headwater_spark.source")

FORMAT = "headwater"

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool = True) -> StructType:
    """The source's rows, as Spark's Kafka source has them (built without a running session)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


SOURCE_SCHEMA = source_schema(True)
"""Every column the source can give (``headers`` only with ``includeHeaders``)."""


def starting_spec(options: SourceOptions, default: int) -> tuple[OffsetSpec, str]:
    """The starting position option in force, with Kafka's precedence: ``startingTimestamp``,
    then ``startingOffsetsByTimestamp``, then ``startingOffsets``."""
    if options.starting_timestamp is not None:
        return OffsetSpec("timestamps", timestamp=options.starting_timestamp), "startingTimestamp"
    if options.starting_by_timestamp is not None:
        name = "startingOffsetsByTimestamp"
        return parse_timestamp_spec(options.starting_by_timestamp, name), name
    name = "startingOffsets"
    return parse_offset_spec(options.starting_offsets, default, name), name


def ending_spec(options: SourceOptions) -> tuple[OffsetSpec, str]:
    """The ending position option in force (batch), with the same precedence."""
    if options.ending_timestamp is not None:
        return OffsetSpec("timestamps", timestamp=options.ending_timestamp), "endingTimestamp"
    if options.ending_by_timestamp is not None:
        name = "endingOffsetsByTimestamp"
        return parse_timestamp_spec(options.ending_by_timestamp, name), name
    return parse_offset_spec(options.ending_offsets, LATEST, "endingOffsets"), "endingOffsets"


def plan_batch(log: TopicLog, options: SourceOptions) -> list[OffsetRange]:
    """The batch query's ``[start, end)`` per partition, fixed once on the driver."""
    ranges = log.subscribed_ranges(options.subscription, streaming=False)
    start_spec, start_name = starting_spec(options, EARLIEST)
    end_spec, end_name = ending_spec(options)
    starts = resolve_starts(
        start_spec,
        ranges,
        log.offset_for_timestamp,
        batch=True,
        fail_on_data_loss=options.fail_on_data_loss,
        timestamp_strategy=options.starting_timestamp_strategy,
        name=start_name,
    )
    ends = resolve_ends(
        end_spec,
        ranges,
        log.offset_for_timestamp,
        fail_on_data_loss=options.fail_on_data_loss,
        name=end_name,
    )
    check_order(starts, ends)
    return [OffsetRange(t, p, starts[(t, p)], ends[(t, p)]) for t, p in sorted(ranges)]


class RangePartition(InputPartition):
    """One Spark task's work: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


def read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side of both readers: stream one range as Arrow batches."""
    if not isinstance(partition, RangePartition):
        # Spark reads one placeholder partition when ``partitions()`` planned none.
        return
    r = partition.range
    with TopicLog(options.brokers) as topic_log:
        yield from topic_log.read_range(
            r.topic,
            r.partition,
            r.start,
            r.end,
            options.rows_per_batch,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
        )


class HeadwaterDataSource(DataSource):
    """Format ``headwater``: topic partitions as a DataFrame or a stream, and a sink to topics."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # Only ``includeHeaders`` shapes the rows; every option is checked when the reader is
        # built, where the mode (batch or streaming) is known.
        include = str(_option(self.options, "includeHeaders", "false")).strip().lower()
        return source_schema(include == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return HeadwaterBatchReader(SourceOptions.parse(dict(self.options), streaming=False))

    @override
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HeadwaterStreamReader(SourceOptions.parse(dict(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from headwater_spark.sink import HeadwaterBatchWriter

        return HeadwaterBatchWriter(dict(self.options), schema, overwrite)

    @override
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from headwater_spark.sink import HeadwaterStreamWriter

        return HeadwaterStreamWriter(dict(self.options), schema, overwrite)


def _option(options: Any, name: str, default: str) -> str:
    for key, value in dict(options).items():
        if key.lower() == name.lower():
            return str(value)
    return default


class HeadwaterBatchReader(DataSourceReader):
    """Batch read of a fixed offset range, resolved once on the driver when the reader is built.

    Resolving at construction (not lazily in ``partitions``) pins ``latest`` to one moment, so
    every action on the DataFrame sees the same records.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        with TopicLog(options.brokers) as topic_log:
            self.ranges = plan_batch(topic_log, options)

    def partitions(self) -> Sequence[InputPartition]:
        pieces = split_ranges(
            self.ranges, self.options.max_records_per_partition, self.options.min_partitions or 1
        )
        return [RangePartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, partition)


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition positions ``{"topic": {"0": next_offset}}``.

    Spark checkpoints the end offset of each planned micro-batch before running it and calls
    ``commit`` after, so a restarted query replans the same last batch and continues from its end:
    no record is skipped or read twice. Partitions that appear later (a topic grows, a new topic
    matches ``subscribePattern``) start at their beginning.

    Data loss (a checkpointed position below the log start after retention, a partition gone)
    fails the query with :class:`DataLossError`; with ``failOnDataLoss`` false the query goes on
    from the log start instead, logging what it skipped.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now_target: PartitionOffsets | None = None
        self._last_trigger = time.monotonic()

    def _ranges(self) -> LogRanges:
        with TopicLog(self.options.brokers) as topic_log:
            return topic_log.subscribed_ranges(self.options.subscription, streaming=True)

    @override
    def initialOffset(self) -> dict[str, Any]:
        spec, name = starting_spec(self.options, LATEST)
        with TopicLog(self.options.brokers) as topic_log:
            ranges = topic_log.subscribed_ranges(self.options.subscription, streaming=True)
            starts = resolve_starts(
                spec,
                ranges,
                topic_log.offset_for_timestamp,
                batch=False,
                fail_on_data_loss=self.options.fail_on_data_loss,
                timestamp_strategy=self.options.starting_timestamp_strategy,
                name=name,
            )
        return to_json_offsets(starts)

    def _checked(self, positions: PartitionOffsets, ranges: LogRanges) -> PartitionOffsets:
        """Positions after Kafka's data-loss rules: gone partitions dropped, positions outside
        the log moved to its start, or DataLossError when ``failOnDataLoss`` is true."""
        out: PartitionOffsets = {}
        for tp, position in sorted(positions.items()):
            if tp not in ranges:
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}/{tp[1]} was read up to offset {position} but no longer exists. "
                        f"{DATA_LOSS_HINT}"
                    )
                log.warning("%s/%s no longer exists; its reading stops", *tp)
                continue
            beginning, end = ranges[tp]
            if beginning <= position <= end:
                out[tp] = position
                continue
            problem = (
                f"{tp[0]}/{tp[1]}: the query's position {position} is outside the log "
                f"[{beginning}, {end})"
            )
            if self.options.fail_on_data_loss:
                raise DataLossError(f"{problem}. {DATA_LOSS_HINT}")
            log.warning("%s; going on from offset %s (failOnDataLoss=false)", problem, beginning)
            out[tp] = beginning
        return out

    @override
    def getDefaultReadLimit(self) -> ReadLimit:
        # Python sources get one limit, not Kafka's composite of both: with both options the
        # maximum is Spark's and the minimum is applied here (_delay).
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    @override
    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = {tp: r[1] for tp, r in self._ranges().items()}

    @override
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        ranges = self._ranges()
        positions = self._checked(from_json_offsets(start), ranges)
        beginnings = {tp: r[0] for tp, r in ranges.items()}
        ends = {tp: r[1] for tp, r in ranges.items()}
        if self._available_now_target is not None:
            # Under availableNow, data arriving after the query started is left for the next run.
            target = self._available_now_target
            ends = {tp: min(end, target.get(tp, beginnings[tp])) for tp, end in ends.items()}
        for tp in ends:
            positions.setdefault(tp, beginnings[tp])
        ends = {tp: max(end, positions[tp]) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = limit_ends(positions, ends, limit.max_rows)
        if self._delay(positions, ends, limit):
            return to_json_offsets(positions)
        return to_json_offsets(ends)

    def _delay(self, positions: PartitionOffsets, ends: PartitionOffsets, limit: ReadLimit) -> bool:
        """``minOffsetsPerTrigger``: hold the batch back while fewer records are pending and
        ``maxTriggerDelay`` has not passed since the last batch (not under availableNow, nor
        when Spark asks for everything available)."""
        minimum = self.options.min_offsets_per_trigger
        pending = sum(ends[tp] - positions[tp] for tp in ends)
        now = time.monotonic()
        if (
            minimum is not None
            and self._available_now_target is None
            and not isinstance(limit, ReadAllAvailable)
            and pending < minimum
            and (now - self._last_trigger) * 1000 < self.options.max_trigger_delay_ms
        ):
            return True
        if pending:
            self._last_trigger = now
        return False

    @override
    def reportLatestOffset(self) -> dict[str, Any]:
        return to_json_offsets({tp: r[1] for tp, r in self._ranges().items()})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts = from_json_offsets(start)
        ends = from_json_offsets(end)
        beginnings: dict[Any, Offset] = {}
        if any(tp not in starts for tp in ends) or not self.options.fail_on_data_loss:
            beginnings = {tp: r[0] for tp, r in self._ranges().items()}
        ranges = []
        for (topic, partition), end_offset in sorted(ends.items()):
            # A partition absent from ``start`` appeared during this batch: read it from its
            # first stored offset, as latestOffset assumed when it planned the batch's end.
            first = starts.get((topic, partition), beginnings.get((topic, partition), end_offset))
            if not self.options.fail_on_data_loss:
                # Skipped by latestOffset's data-loss rule: the same skip when reading.
                first = max(first, min(beginnings.get((topic, partition), first), end_offset))
            ranges.append(OffsetRange(topic, partition, Offset(first), end_offset))
        pieces = split_ranges(
            ranges, self.options.max_records_per_partition, self.options.min_partitions or 1
        )
        return [RangePartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: positions live in Spark's checkpoint, not in the brokers."""
