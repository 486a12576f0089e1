"""The ``headwater`` sink: ``df.write.format("headwater")`` and ``writeStream.format("headwater")``.

Rows become records, as with Spark's Kafka sink. Columns (any other column is an error, so a
misspelt ``vaule`` is caught instead of dropped):

    value      BINARY or STRING   required (null: a tombstone)
    key        BINARY or STRING   optional; keyed records go to murmur2(key) % partitions
    topic      STRING             optional if the ``topic`` option is set (the option wins)
    partition  INT                optional; an explicit partition wins over the key
    headers    ARRAY<STRUCT<key: STRING, value: BINARY>>   optional

Options: ``kafka.bootstrap.servers`` (or ``brokers``), ``topic``, and producer settings as
``kafka.<key>`` (``kafka.linger.ms``, ``kafka.batch.size``, ``kafka.compression.type``, ...).

Where code runs: the writer objects are built and checked on the driver; ``write`` runs in one
task per Spark partition and builds its own SDK :class:`~headwater.producer.Producer` there:
idempotent, ``acks=all``, routing each partition to its leader. A task flushes before it
returns and fails if any record was not acknowledged, so Spark commits a batch or micro-batch
only when every record of it is stored.

What a re-run does (docs/spark.md, "Sink semantics"): within one task attempt the idempotent
producer stores a retried request once, so network retries never duplicate. A new attempt
(Spark retrying a failed task, or re-running a micro-batch after a driver restart) is a new
producer with a new producer id: the broker cannot recognise its records as repeats, so records
the failed attempt had already stored are stored again. The sink is therefore at-least-once per
micro-batch, never losing a record; exactly-once needs transactions (read_committed), which the
platform does not have yet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from headwater_spark.options import OptionError, SinkOptions, check_names

log = logging.getLogger("headwater_spark.sink")

SINK_COLUMNS = ["value", "key", "topic", "partition", "headers"]


@dataclass
class Produced(WriterCommitMessage):
    """One task's outcome: records stored per topic."""

    records: dict[str, int] = field(default_factory=dict)


def _is_headers(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType | StringType)
    )


def check_columns(schema: StructType, options: SinkOptions) -> None:
    """The sink's column rules, checked on the driver before any task runs."""
    columns = check_names(
        {f.name: f.name for f in schema.fields}, SINK_COLUMNS, "headwater sink", "column"
    )
    types = {canonical: schema[name].dataType for canonical, name in columns.items()}
    if "value" not in types:
        raise OptionError("the headwater sink needs a 'value' column (BINARY or STRING)")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], BinaryType | StringType):
            raise OptionError(
                f"column {name} must be BINARY or STRING, not {types[name].simpleString()}"
            )
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise OptionError(f"column topic must be STRING, not {types['topic'].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError(f"column partition must be INT, not {types['partition'].simpleString()}")
    if "headers" in types and not _is_headers(types["headers"]):
        raise OptionError(
            "column headers must be ARRAY<STRUCT<key: STRING, value: BINARY>>, not "
            f"{types['headers'].simpleString()}"
        )
    if options.topic is None and "topic" not in types:
        raise OptionError("the headwater sink needs a 'topic' option or a 'topic' column")


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    for i, field_name in enumerate(batch.schema.names):
        if field_name.lower() == name:
            return batch.column(i)
    return None


def _binary(array: pa.Array | None) -> list[bytes | None] | None:
    if array is None:
        return None
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary())
    values: list[bytes | None] = array.to_pylist()
    return values


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> Produced:
    """Executor side: produce every row of ``batches``, flush, fail on any record not stored.

    Rows of one fixed topic without partition or header columns go through the producer's
    ``produce_many`` (one call per Arrow batch); anything else is produced row by row.
    """
    from headwater.producer import Producer

    produced = Produced()
    failures: list[BaseException] = []

    def delivered(error: BaseException | None, _metadata: object) -> None:
        if error is not None:
            failures.append(error)

    bulk = []
    producer = Producer(options.producer_config())
    try:
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            values = _binary(_column(batch, "value"))
            keys = _binary(_column(batch, "key"))
            assert values is not None  # checked on the driver
            partition_column = _column(batch, "partition")
            headers_column = _column(batch, "headers")
            topic_column = _column(batch, "topic")
            if options.topic is not None or topic_column is None:
                topics: Sequence[str | None] = [options.topic] * n
                fixed_topic = options.topic
            else:
                topics = topic_column.to_pylist()
                distinct = set(topics)
                fixed_topic = topics[0] if len(distinct) == 1 else None
            if fixed_topic is not None and partition_column is None and headers_column is None:
                bulk.append(producer.produce_many(fixed_topic, values, keys))
                produced.records[fixed_topic] = produced.records.get(fixed_topic, 0) + n
                continue
            partitions = partition_column.to_pylist() if partition_column is not None else None
            headers = headers_column.to_pylist() if headers_column is not None else None
            for i in range(n):
                topic = topics[i]
                if topic is None:
                    raise ValueError(f"row {i} of a batch has a null topic and no topic option")
                record_headers = (
                    [(h["key"], h["value"]) for h in headers[i]]
                    if headers is not None and headers[i]
                    else None
                )
                producer.produce(
                    topic,
                    value=values[i],
                    key=None if keys is None else keys[i],
                    partition=-1 if partitions is None or partitions[i] is None else partitions[i],
                    headers=record_headers,
                    on_delivery=delivered,
                )
                produced.records[topic] = produced.records.get(topic, 0) + 1
        unfinished = producer.flush(None)
    finally:
        producer.close(30.0)
    for future in bulk:
        try:
            error = future.exception(0)
        except TimeoutError as exc:  # not acknowledged: the task fails
            error = exc
        if error is not None:
            failures.append(error)
    if unfinished or failures:
        raise RuntimeError(
            f"headwater sink: {unfinished} record(s) unacknowledged, {len(failures)} failure(s) "
            f"(first: {failures[:1]}); the task fails so Spark does not commit the write"
        )
    return produced


def _total(messages: Sequence[WriterCommitMessage | None]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for message in messages:
        if isinstance(message, Produced):
            for topic, count in message.records.items():
                totals[topic] = totals.get(topic, 0) + count
    return totals


class HeadwaterBatchWriter(DataSourceArrowWriter):
    """``df.write.format("headwater").mode("append")``: append every row as a record."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError(
                "the headwater sink appends records; a topic cannot be overwritten "
                "(use mode('append'))"
            )
        self.options = SinkOptions.parse(options)
        check_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Produced:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("headwater sink: stored %s", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged cannot be taken back (no transactions): say how many.
        log.warning(
            "headwater sink: the write failed; records already stored stay: %s", _total(messages)
        )


class HeadwaterStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("headwater")``: each micro-batch's rows as records (at-least-once
    across attempts, see the module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.options = SinkOptions.parse(options)
        check_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Produced:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803  # Spark's name
        log.info("headwater sink: micro-batch %s stored %s", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803  # Spark's name
        log.warning(
            "headwater sink: micro-batch %s failed; records already stored stay and the "
            "re-run stores them again: %s",
            batchId,
            _total(messages),
        )
