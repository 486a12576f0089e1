"""Reading topic partitions from Headwater brokers over HTTP: log ranges and raw record batches.

:class:`TopicLog` runs on both sides: the driver asks it for partition lists and offset ranges when
planning; each executor builds its own inside ``read()`` (an ``httpx.Client`` holds sockets and is
never pickled) and streams one offset range as Arrow record batches.

Fetches use the broker's raw batch path (``Accept: application/vnd.headwater.batches``) through
the SDK's BrokerClient and the shared codec (:mod:`headwater.records`), so the broker sends stored
bytes without re-encoding; :mod:`headwater_spark.record_columns` decodes them (aiokafka's compiled
reader for uncompressed batches, the shared codec otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

import httpx
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs

from headwater.client.broker import BrokerClient
from headwater.closeable import Closeable
from headwater.errors import HeadwaterError
from headwater.records import iter_batches
from headwater.types import Offset, PartitionId
from headwater_spark.record_columns import RecordColumns, append_batch

T = TypeVar("T")

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADER_TYPE),
    ]
)
"""Rows of the ``headwater`` source, as Arrow; Spark's side is ``source.SOURCE_SCHEMA_DDL``."""


class TopicLog(Closeable):
    """Typed reads of a cluster's topics: partitions, log ranges and records by offset.

    Built on the SDK's :class:`~headwater.client.broker.BrokerClient`, one per broker URL. The
    brokers are tried in order: any broker answers a fetch by offset (docs/broker-api.md), so
    the next one is used when one is unreachable.
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
        self._clients = [
            BrokerClient(url, timeout=timeout, transport=transport, client_id="headwater-spark")
            for url in brokers
        ]

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def _any(self, call: Callable[[BrokerClient], T]) -> T:
        last: Exception | None = None
        for client in self._clients:
            try:
                return call(client)
            except httpx.TransportError as exc:
                last = exc
        urls = [c.base_url for c in self._clients]
        raise ConnectionError(f"no broker of {urls} answered: {last}")

    def log_ranges(
        self, topics: Sequence[str]
    ) -> dict[tuple[str, PartitionId], tuple[Offset, Offset]]:
        """``(beginning, end)`` of every partition of ``topics``: the first offset still stored
        and the next one to be written. One description call per topic (driver)."""
        out: dict[tuple[str, PartitionId], tuple[Offset, Offset]] = {}
        for topic in topics:
            description = self._any(partial(BrokerClient.describe_topic, topic=topic))
            for p in description.partitions:
                beginning = p.beginning_offset if p.beginning_offset is not None else Offset(0)
                end = p.end_offset if p.end_offset is not None else beginning
                out[(topic, p.partition)] = (beginning, end)
        return out

    def fetch(self, topic: str, partition: PartitionId, offset: Offset) -> tuple[bytes, Offset]:
        """Raw batches from ``offset`` on and the offset after the last record returned."""
        fetched = self._any(
            lambda c: c.fetch_batches(topic, partition, offset, max_bytes=self.fetch_max_bytes)
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
    ) -> Iterator[RecordColumns]:
        """Records ``[start, end)`` of one partition in column chunks of ``rows_per_batch``.

        Runs on executors. A ``lean`` read fills only offsets and values (see
        :class:`~headwater_spark.record_columns.RecordColumns`). Control batches (transaction
        markers) are skipped, as Kafka's readers do; offsets missing from the log (none today,
        later compaction) are simply absent.
        """
        pending = RecordColumns()
        position = start
        while position < end:
            buf, next_offset = self.fetch(topic, partition, position)
            progressed = False
            for pos, header in iter_batches(buf, verify_crc=True):
                if header.is_control or header.last_offset < position:
                    continue
                if append_batch(pending, buf, pos, header, position, end, lean=lean):
                    progressed = True
                position = Offset(max(position, min(header.last_offset + 1, end)))
                while len(pending) >= rows_per_batch:
                    yield pending.take(rows_per_batch)
                if position >= end:
                    break
            if next_offset > position:
                position = Offset(min(next_offset, end))
                progressed = True
            if not progressed:
                raise HeadwaterError(
                    f"{topic}/{partition}: no records at offset {position} though the range "
                    f"ends at {end} (was the log truncated or the range planned past the end?)"
                )
        if len(pending):
            yield pending

    def read_range(
        self, topic: str, partition: PartitionId, start: Offset, end: Offset, rows_per_batch: int
    ) -> Iterator[pa.RecordBatch]:
        """Records ``[start, end)`` of one partition as Arrow batches of the source schema."""
        for columns in self.read_columns(topic, partition, start, end, rows_per_batch):
            yield to_arrow(topic, partition, columns)


_NO_HEADERS: list[dict[str, Any]] = []


def to_arrow(topic: str, partition: PartitionId, columns: RecordColumns) -> pa.RecordBatch:
    """Decoded records as one Arrow batch of the source schema (column-wise, no per-row calls)."""
    n = len(columns)
    timestamps = pa.array(columns.timestamps, pa.timestamp("ms", tz="UTC"))
    headers = [
        [{"key": k, "value": v} for k, v in h] if h else _NO_HEADERS for h in columns.headers
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(columns.offsets, pa.int64()),
            timestamps.cast(pa.timestamp("us", tz="UTC")),
            pa.array(columns.keys, pa.binary()),
            pa.array(columns.values, pa.binary()),
            pa.array(headers, HEADER_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )
