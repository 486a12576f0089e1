"""Reading topic partitions from Headwater brokers over HTTP: log ranges and raw record batches.

:class:`TopicLog` runs on both sides: the driver asks it for partition lists and offset ranges when
planning; each executor builds its own inside ``read()`` (an ``httpx.Client`` holds sockets and is
never pickled) and streams one offset range as Arrow record batches.

Fetches use the broker's raw batch path (``Accept: application/vnd.headwater.batches``) through
the SDK's cluster client, which sends each partition's fetch to its leader and follows a moved or
lost leader (:mod:`headwater.client.cluster`), and the shared codec (:mod:`headwater.records`), so
the broker sends stored bytes without re-encoding; :mod:`headwater_spark.arrow_records` decodes
each fetch column-wise into numpy and Arrow arrays.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TypeVar

import httpx
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs

from headwater.client.broker import BrokerClient, PartitionOffsets
from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.errors import HeadwaterError, OffsetOutOfRangeError, TopicNotFoundError
from headwater.records import iter_batches
from headwater.types import Offset, PartitionId
from headwater_spark.arrow_records import FetchedRecords, decode_fetch
from headwater_spark.offsets import (
    DATA_LOSS_HINT,
    DataLossError,
    LogRanges,
    OffsetRange,
    TopicPartition,
)
from headwater_spark.options import Subscription

T = TypeVar("T")

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", HEADER_TYPE),
    ]
)
"""Rows of the ``headwater`` source with headers, as Arrow (Spark's Kafka source's columns, in
its order); without ``includeHeaders`` the last column is left out. Spark's side is
``source.source_schema``."""
ARROW_SCHEMA_NO_HEADERS = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index("headers"))


class TopicLog(Closeable):
    """Typed reads of a cluster's topics: partitions, log ranges and records by offset.

    Built on the SDK's :class:`~headwater.client.cluster.ClusterClient`: listings and
    descriptions come from any broker that answers, fetches and offsets from each partition's
    leader; a request that meets a moved leader (421), no leader (503) or a broker that stops
    answering is retried for up to ``timeout`` seconds before the task fails.
    """

    def __init__(
        self,
        brokers: Sequence[str],
        *,
        timeout: float = 30.0,
        fetch_max_bytes: int = 4 * 1024 * 1024,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not brokers:
            raise ValueError("at least one broker URL is needed")
        self.fetch_max_bytes = fetch_max_bytes
        self._cluster = ClusterClient(
            brokers, timeout=timeout, transport=transport, client_id="headwater-spark"
        )

    def close(self) -> None:
        self._cluster.close()

    def _any(self, call: Callable[[BrokerClient], T]) -> T:
        try:
            return self._cluster.call_any(call)
        except httpx.TransportError as exc:
            urls = list(self._cluster.bootstrap)
            raise ConnectionError(f"no broker of the cluster of {urls} answered: {exc}") from exc

    def _leader(self, topic: str, partition: int, call: Callable[[BrokerClient], T]) -> T:
        try:
            return self._cluster.call_leader(topic, partition, call)
        except httpx.TransportError as exc:
            raise ConnectionError(
                f"the leader of {topic}/{partition} did not answer, nor did the metadata show "
                f"another in time: {exc}"
            ) from exc

    def log_ranges(
        self, topics: Sequence[str], *, missing_ok: bool = False
    ) -> dict[tuple[str, PartitionId], tuple[Offset, Offset]]:
        """``(beginning, end)`` of every partition of ``topics``: the first offset still stored
        and the next one to be written. One description call per topic (driver). A topic that
        does not exist raises TopicNotFoundError, or is left out with ``missing_ok``."""
        out: dict[tuple[str, PartitionId], tuple[Offset, Offset]] = {}
        for topic in topics:
            try:
                description = self._any(partial(BrokerClient.describe_topic, topic=topic))
            except TopicNotFoundError:
                if missing_ok:
                    continue
                raise
            for p in description.partitions:
                if p.beginning_offset is None or p.end_offset is None:
                    # The answering broker does not lead it: its leader tells.
                    offsets = self._leader(
                        topic, p.partition, partial(_offsets, topic, p.partition)
                    )
                    out[(topic, p.partition)] = (offsets.beginning_offset, offsets.end_offset)
                else:
                    out[(topic, p.partition)] = (p.beginning_offset, p.end_offset)
        return out

    def subscribed_ranges(self, subscription: Subscription, *, streaming: bool) -> LogRanges:
        """Log ranges of the partitions a subscription covers right now (driver).

        A batch query fails on a subscribed topic or assigned partition that does not exist; a
        stream waits for them (a topic may be created after the query starts), as Kafka's does.
        """
        if subscription.pattern is not None:
            pattern = re.compile(subscription.pattern)
            topics = [t for t in self._any(BrokerClient.list_topics) if pattern.fullmatch(t)]
            return self.log_ranges(sorted(topics), missing_ok=True)
        if not subscription.assigned:
            return self.log_ranges(subscription.topics, missing_ok=streaming)
        topics = sorted({t for t, _ in subscription.assigned})
        ranges = self.log_ranges(topics, missing_ok=streaming)
        wanted = {(t, PartitionId(p)) for t, p in subscription.assigned}
        absent = sorted(tp for tp in wanted if tp not in ranges)
        if absent and not streaming:
            raise HeadwaterError(
                f"option assign names partitions that do not exist: "
                f"{[f'{t}/{p}' for t, p in absent]}"
            )
        return {tp: r for tp, r in ranges.items() if tp in wanted}

    def offset_for_timestamp(self, tp: TopicPartition, timestamp: int) -> Offset | None:
        """The first offset of ``tp`` whose record timestamp is >= ``timestamp``, or None."""
        offset, _ = self._leader(
            tp[0], int(tp[1]), lambda c: c.offset_for_timestamp(tp[0], int(tp[1]), timestamp)
        )
        return offset

    def fetch(self, topic: str, partition: PartitionId, offset: Offset) -> tuple[bytes, Offset]:
        """Raw batches from ``offset`` on and the offset after the last record returned."""
        fetched = self._leader(
            topic,
            partition,
            lambda c: c.fetch_batches(topic, partition, offset, max_bytes=self.fetch_max_bytes),
        )
        return fetched.data, fetched.next_offset

    def read_columns(
        self,
        topic: str,
        partition: PartitionId,
        start: Offset,
        end: Offset,
        rows_per_batch: int,
        *,
        lean: bool = False,
        fail_on_data_loss: bool = True,
    ) -> Iterator[FetchedRecords]:
        """Records ``[start, end)`` of one partition in column chunks of at most
        ``rows_per_batch``, decoded one fetch at a time (:mod:`headwater_spark.arrow_records`).

        Runs on executors. A ``lean`` read fills only offsets and values. Control batches
        (transaction markers) are skipped, as Kafka's readers do; offsets missing from the log
        (none today, later compaction) are simply absent. When retention removes offsets of the
        range before they are read, the read fails with :class:`DataLossError`, or with
        ``fail_on_data_loss`` False goes on from the new log start.
        """
        with ThreadPoolExecutor(1, thread_name_prefix="headwater-fetch") as pool:
            yield from self._read_fetches(
                pool,
                OffsetRange(topic, partition, start, end),
                rows_per_batch=rows_per_batch,
                lean=lean,
                fail_on_data_loss=fail_on_data_loss,
            )

    def _read_fetches(
        self,
        pool: ThreadPoolExecutor,
        planned: OffsetRange,
        *,
        rows_per_batch: int,
        lean: bool,
        fail_on_data_loss: bool,
    ) -> Iterator[FetchedRecords]:
        # The next fetch is asked for (on ``pool``'s thread) as soon as a response says where
        # it ends, so the broker serves it while this one is decoded and handed to Spark. It is
        # used only if the read really goes on from there; otherwise it is dropped.
        topic, partition, start, end = planned.topic, planned.partition, planned.start, planned.end
        ahead: tuple[Offset, Future[tuple[bytes, Offset]]] | None = None
        position = start
        while position < end:
            try:
                if ahead is not None and ahead[0] == position:
                    buf, next_offset = ahead[1].result()
                else:
                    buf, next_offset = self.fetch(topic, partition, position)
            except OffsetOutOfRangeError as exc:
                ahead = None
                beginning = self._leader(
                    topic, partition, partial(_offsets, topic, partition)
                ).beginning_offset
                if fail_on_data_loss or beginning <= position:
                    raise DataLossError(
                        f"{topic}/{partition}: offsets [{position}, {min(beginning, end)}) of "
                        f"the planned range [{start}, {end}) are gone ({exc}). {DATA_LOSS_HINT}"
                    ) from exc
                position = Offset(min(beginning, end))
                continue
            ahead = None
            following = Offset(min(next_offset, end))
            if position < following < end:
                ahead = (following, pool.submit(self.fetch, topic, partition, following))
            low = position
            placed = []
            for pos, header in iter_batches(buf, verify_crc=True):
                if header.base_offset >= end:
                    break
                if header.is_control or header.last_offset < position:
                    continue
                placed.append((pos, header))
                position = Offset(max(position, min(header.last_offset + 1, end)))
                if position >= end:
                    break
            records = decode_fetch(buf, placed, low, end, lean=lean)
            progressed = len(records) > 0
            for at in range(0, len(records), rows_per_batch):
                yield records.slice(at, at + rows_per_batch)
            if next_offset > position:
                position = Offset(min(next_offset, end))
                progressed = True
            if not progressed:
                if not fail_on_data_loss:
                    break  # the rest of the range is gone: skipped, as asked
                raise DataLossError(
                    f"{topic}/{partition}: no records at offset {position} though the range "
                    f"ends at {end} (was the log truncated?). {DATA_LOSS_HINT}"
                )

    def read_range(
        self,
        topic: str,
        partition: PartitionId,
        start: Offset,
        end: Offset,
        rows_per_batch: int,
        *,
        include_headers: bool = False,
        fail_on_data_loss: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        """Records ``[start, end)`` of one partition as Arrow batches of the source schema."""
        for records in self.read_columns(
            topic, partition, start, end, rows_per_batch, fail_on_data_loss=fail_on_data_loss
        ):
            yield to_arrow(topic, partition, records, include_headers)


def _offsets(topic: str, partition: int, client: BrokerClient) -> PartitionOffsets:
    return client.offsets(topic, partition)


def to_arrow(
    topic: str, partition: PartitionId, records: FetchedRecords, include_headers: bool = True
) -> pa.RecordBatch:
    """Decoded records as one Arrow batch of the source schema (column-wise, no per-row calls)."""
    n = len(records)
    columns = records.arrow(headers=include_headers)
    arrays = [
        columns["key"],
        columns["value"],
        # One value repeated: a dictionary-free repeat in C instead of a Python list of n.
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        columns["offset"],
        columns["timestamp"].cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        columns["timestampType"],
    ]
    if not include_headers:
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA_NO_HEADERS)
    arrays.append(columns["headers"])
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
