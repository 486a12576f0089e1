"""The Producer: batches records per partition and ships them to brokers as RecordBatch v2.

Threads and flow::

    caller threads --produce()--> open batch per (topic, partition) --sealed when batch.size is
    reached, linger.ms has passed, or flush()--> ready queue --sender thread assigns producer id,
    epoch and sequence--> worker pool: encode (+compress) once, POST .../batches, retry the same
    bytes on failure --> futures resolved, on_delivery callbacks run (on a worker thread)

Idempotence (default on): the producer gets ``(producer_id, epoch)`` from ``POST /producers``
and numbers each partition's records; a retried batch carries the same sequence, so the broker
stores it once and answers with the original offsets. To keep that exact, an idempotent producer
has one request in flight per partition (HTTP/1.1 sends in-flight requests on separate
connections, which may overtake each other); batches that queue up behind it leave together in
the next request (the batch route takes several concatenated), and different partitions are sent
in parallel. If the broker has forgotten the producer id (expired), a new one is taken and the
request renumbered, as Kafka's producer does on UNKNOWN_PRODUCER_ID.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import cast

import httpx

from headwater.client.broker import BatchAck, BrokerClient
from headwater.closeable import Closeable
from headwater.config import ProducerConfig
from headwater.errors import (
    HeadwaterError,
    PartitionNotFoundError,
    UnknownProducerIdError,
    UnknownServerError,
)
from headwater.records.batch import HEADER_SIZE, encode_batch, encode_values_batch
from headwater.records.partitioner import StickyPartitioner, murmur2
from headwater.types import Offset, PartitionId, ProducerEpoch, ProducerId, TimestampMs

log = logging.getLogger("headwater.producer")

Headers = Sequence[tuple[str, bytes | str | None]]
DeliveryCallback = Callable[[BaseException | None, "RecordMetadata | None"], None]

# Bytes a record adds to a batch beyond its key and value (length, attributes, deltas, lengths):
# an upper bound for values under 8 KiB with small headers, so a batch stays under batch.size.
_RECORD_OVERHEAD = 16
# Largest request the sender builds from queued batches of one partition (the broker's default
# BROKER_MAX_REQUEST_BYTES is 64 MiB).
_MAX_REQUEST_BYTES = 16 * 1_048_576
_BYTES_OR_NONE = frozenset((bytes, type(None)))
_KEY_HASH_CACHE = 65_536  # distinct keys whose murmur2 hash is remembered


class ProducerClosedError(RuntimeError):
    """produce() was called on a closed producer."""


class DeliveryTimeoutError(TimeoutError):
    """The record was not acknowledged within ``delivery.timeout.ms``."""


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record was stored. ``offset`` is -1 with ``acks=0``."""

    topic: str
    partition: PartitionId
    offset: Offset
    timestamp: TimestampMs


class _Batch:
    """Records bound for one partition, from the first append until acknowledged or failed."""

    __slots__ = (
        "callbacks",
        "created",
        "deadline",
        "done",
        "encoded",
        "error",
        "headers",
        "identity",
        "keys",
        "metadata_offset",
        "metadata_timestamp",
        "partition",
        "sealed",
        "size",
        "timestamp",
        "timestamps",
        "topic",
        "values",
        "waiters",
    )

    def __init__(self, topic: str, partition: int, now: float, linger: float) -> None:
        self.topic = topic
        self.partition = partition
        # Records as columns: a batch of unkeyed, header-less records (the common case) keeps
        # only its values, so produce() allocates nothing per record that the garbage collector
        # tracks, and the encoder gets the values without taking tuples apart. keys and
        # headers appear with the first record that has either.
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None
        self.headers: list[Sequence[tuple[str, bytes | None]]] | None = None
        self.timestamps: list[int] | None = None
        self.size = 0
        self.sealed = False
        self.created = now
        self.deadline = now + linger
        self.timestamp = int(time.time() * 1000)
        self.callbacks: list[tuple[int, DeliveryCallback]] = []
        self.waiters: list[tuple[int, Callable[[DeliveryFuture], None]]] = []
        self.done = threading.Event()
        self.encoded: bytes | None = None
        self.identity: tuple[int, int, int] = (-1, -1, -1)  # producer id, epoch, base sequence
        self.error: BaseException | None = None
        self.metadata_offset = -1
        self.metadata_timestamp = -1

    def add_columns(self) -> tuple[list[bytes | None], list[Sequence[tuple[str, bytes | None]]]]:
        """The keys and headers columns, created (null keys, no headers) for the records so far
        if not there yet; call before appending the next value."""
        if self.keys is None or self.headers is None:
            self.keys = [None] * len(self.values)
            self.headers = [()] * len(self.values)
        return self.keys, self.headers


class DeliveryFuture:
    """The outcome of one ``produce()``: a small subset of ``concurrent.futures.Future``.

    ``result(timeout)`` blocks until the record's batch is acknowledged and returns its
    :class:`RecordMetadata`, or raises the delivery error (``TimeoutError`` if ``timeout``
    passes first). One object per record, so it is deliberately tiny: it points at its batch.
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done.is_set()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout}s")
        if batch.error is not None:
            raise batch.error
        return _metadata(batch, self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.done.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout}s")
        return self._batch.error

    def add_done_callback(self, fn: Callable[[DeliveryFuture], None]) -> None:
        """Call ``fn(future)`` once delivered or failed (now, if that already happened)."""
        batch = self._batch
        batch.waiters.append((self._index, fn))
        # The batch may have completed between the append and here; a callback runs at most once.
        if batch.done.is_set():
            try:
                batch.waiters.remove((self._index, fn))
            except ValueError:
                return
            fn(self)


class BulkDeliveryFuture:
    """The outcome of one ``produce_many()``: done when every one of its records is.

    ``result(timeout)`` returns the records' :class:`RecordMetadata` in the order given, or
    raises the first delivery error.
    """

    __slots__ = ("_segments",)

    def __init__(self, segments: list[tuple[_Batch, int, int]]) -> None:
        self._segments = segments  # (batch, index of the first record in it, record count)

    def done(self) -> bool:
        return all(batch.done.is_set() for batch, _, _ in self._segments)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[RecordMetadata] = []
        for batch, start, count in self._segments:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not batch.done.wait(remaining):
                raise TimeoutError(f"records not acknowledged within {timeout}s")
            if batch.error is not None:
                raise batch.error
            out.extend(_metadata(batch, i) for i in range(start, start + count))
        return out


def _metadata(batch: _Batch, index: int) -> RecordMetadata:
    offset = batch.metadata_offset + index if batch.metadata_offset >= 0 else -1
    if batch.metadata_timestamp >= 0:
        timestamp = batch.metadata_timestamp
    elif batch.timestamps is not None:
        timestamp = batch.timestamps[index]
    else:
        timestamp = batch.timestamp
    return RecordMetadata(
        batch.topic, PartitionId(batch.partition), Offset(offset), TimestampMs(timestamp)
    )


class _ReorderedBulkFuture(BulkDeliveryFuture):
    """A bulk future whose records were queued grouped by partition; results in input order."""

    __slots__ = ("_order",)

    def __init__(self, segments: list[tuple[_Batch, int, int]], order: list[int]) -> None:
        super().__init__(segments)
        self._order = order

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        grouped = super().result(timeout)
        return [grouped[pos] for pos in self._order]


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, HeadwaterError) and exc.http_status >= 500


class Producer(Closeable):
    """Sends records to a Headwater cluster, batched, compressed and (by default) idempotently.

    Contract:

    * ``produce()`` never blocks on the network except to learn a topic's partition count the
      first time, or when ``buffer.memory`` bytes are already waiting (then up to
      ``max.block.ms``). It returns a :class:`DeliveryFuture`.
    * Partition choice: an explicit ``partition`` wins; a key goes to
      ``(murmur2(key) & 0x7fffffff) % partitions`` exactly as Kafka's Java client; records without
      a key use the sticky partitioner.
    * Records of one partition are stored in ``produce()`` order. With ``enable.idempotence``
      (default) a batch that is retried after a timeout or connection error is stored once.
    * ``on_delivery(err, metadata)`` and future callbacks run on a producer worker thread after
      the batch's outcome is known; they should be quick and must not call ``flush()``.
    * Failures: connection errors and 5xx answers are retried with ``retry.backoff.ms`` until
      ``delivery.timeout.ms`` after the record was produced (or ``retries`` is exhausted); other
      errors fail the batch's records with the typed error from ``headwater.errors``.
    * ``flush()`` waits for everything produced so far; ``close()`` flushes then stops threads.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = ProducerConfig.from_dict(config or {})
        cfg = self.config
        self._clients = [
            BrokerClient(
                url,
                timeout=cfg.request_timeout_ms / 1000,
                transport=transport,
                client_id=cfg.client_id,
                max_connections=max(cfg.max_in_flight, 2) * 2,
            )
            for url in cfg.bootstrap_servers
        ]
        self._client_index = 0
        self._linger = cfg.linger_ms / 1000
        # Records may fill batch.size minus the batch header; a record larger than that gets a
        # batch of its own (and the broker's max.message.bytes decides).
        self._batch_limit = cfg.batch_size - HEADER_SIZE
        self._sticky = StickyPartitioner(cfg.batch_size)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._open: dict[tuple[str, int], _Batch] = {}
        self._ready: deque[_Batch] = deque()
        self._in_flight: dict[tuple[str, int], int] = {}
        self._per_partition_limit = 1 if cfg.enable_idempotence else cfg.max_in_flight
        self._unfinished = 0
        self._pending_bytes = 0
        self._flushing = 0
        self._closed = False
        self._buffer_memory = cfg.buffer_memory
        self._partition_counts: dict[str, int] = {}
        self._key_hashes: dict[bytes, int] = {}
        self._partitions_fetched: dict[str, float] = {}
        self._sticky_open: dict[str, _Batch] = {}
        self._identity: tuple[ProducerId, ProducerEpoch] | None = None
        self._identity_lock = threading.Lock()
        self._sequences: dict[tuple[str, int], int] = {}
        self._workers = ThreadPoolExecutor(
            max_workers=max(cfg.max_in_flight, 2), thread_name_prefix="headwater-producer"
        )
        self._sender = threading.Thread(
            target=self._run_sender, name="headwater-producer-sender", daemon=True
        )
        self._sender.start()

    # -- public API ---------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers | Mapping[str, bytes | str | None] | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int | None = None,
    ) -> DeliveryFuture:
        """Queue one record; see the class contract. ``timestamp`` defaults to the batch's time."""
        # The hot path of every producing application. The common call (bytes value, no
        # partition, headers or timestamp; no key, or a key whose hash is cached) joins an open
        # batch with room in one locked block; anything else takes the general path below, which
        # does the same plus partition checks, new batches, sealing and buffer waits.
        if (
            partition is None
            and headers is None
            and timestamp is None
            and value.__class__ is bytes
            and (key is None or key.__class__ is bytes)
        ):
            size = len(value) + _RECORD_OVERHEAD
            if key is not None:
                size += len(key)
                hashed = self._key_hashes.get(key)
                count = self._partition_counts.get(topic)
                hashed_partition = -1 if hashed is None or count is None else hashed % count
            with self._lock:
                if key is None:
                    batch = self._sticky_open.get(topic)
                    if batch is not None and batch.sealed:
                        batch = None
                elif hashed_partition >= 0:
                    batch = self._open.get((topic, hashed_partition))
                else:
                    batch = None
                if (
                    batch is not None
                    and batch.size + size <= self._batch_limit
                    and batch.timestamps is None
                    and self._pending_bytes < self._buffer_memory
                    and not self._closed
                ):
                    values = batch.values
                    index = len(values)
                    if key is not None or batch.keys is not None:
                        keys, all_headers = batch.add_columns()
                        keys.append(key)
                        all_headers.append(())
                    values.append(value)
                    if on_delivery is not None:
                        batch.callbacks.append((index, on_delivery))
                    batch.size += size
                    self._pending_bytes += size
                    if batch.size >= self._batch_limit:
                        self._seal(batch)
                    return DeliveryFuture(batch, index)
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")
        size = _RECORD_OVERHEAD
        if value is not None:
            size += len(value)
        record_headers: Sequence[tuple[str, bytes | None]] = ()
        if headers:
            record_headers = _normalize_headers(headers)
            size += sum(len(k) + len(v or b"") + 2 for k, v in record_headers)
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_count(topic)
        if key is not None:
            size += len(key)
            if partition is None:
                hashed = self._key_hashes.get(key)
                if hashed is None:
                    hashed = self._hash_key(key)
                partition = hashed % count
        if partition is not None and not 0 <= partition < count:
            count = self._partition_count(topic)  # the topic may have grown since it was cached
            if not 0 <= partition < count:
                raise PartitionNotFoundError(
                    f"partition {partition} of topic {topic!r} does not exist ({count} partitions)"
                )
        with self._lock:
            if self._closed:
                raise ProducerClosedError("produce() on a closed producer")
            if self._pending_bytes >= self._buffer_memory:
                self._wait_for_buffer()
            if partition is None:
                # Sticky: unkeyed records join the topic's current sticky batch while it is open;
                # once it is sealed (batch.size reached or lingered out) another partition is
                # chosen, which spreads load by bytes as KIP-794 does.
                batch = self._sticky_open.get(topic)
                if batch is None or batch.sealed or batch.size + size > self._batch_limit:
                    if batch is not None and not batch.sealed:
                        self._seal(batch)
                    if batch is None:
                        chosen = self._sticky.partition(topic, count)
                    else:
                        self._sticky.on_batch_complete(topic, count)
                        chosen = self._sticky.partition(topic, count)
                    batch = self._open_batch(topic, chosen)
                    self._sticky_open[topic] = batch
            else:
                batch = self._open.get((topic, partition))
                if batch is not None and batch.size + size > self._batch_limit and batch.values:
                    self._seal(batch)
                    batch = None
                if batch is None:
                    batch = self._open_batch(topic, partition)
            index = len(batch.values)
            if key is not None or record_headers or batch.keys is not None:
                keys, all_headers = batch.add_columns()
                keys.append(key)
                all_headers.append(record_headers)
            batch.values.append(value)
            if timestamp is not None or batch.timestamps is not None:
                if batch.timestamps is None:
                    batch.timestamps = [batch.timestamp] * index
                batch.timestamps.append(batch.timestamp if timestamp is None else timestamp)
            if on_delivery is not None:
                batch.callbacks.append((index, on_delivery))
            batch.size += size
            self._pending_bytes += size
            if batch.size >= self._batch_limit:
                self._seal(batch)
        return DeliveryFuture(batch, index)

    def produce_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
    ) -> BulkDeliveryFuture:
        """Queue many records at once: ``values[i]`` with ``keys[i]`` (no headers, batch time).

        The same contract as ``produce()`` (partitioning, ordering, idempotence), with the
        per-call overhead paid once: for bulk loads, replays and benchmarks. Values and keys
        must be ``bytes`` or ``None``.
        """
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} values")
        value_types = set(map(type, values))  # checked without a Python step per record
        if not value_types <= _BYTES_OR_NONE:
            for v in values:
                if v is not None and v.__class__ is not bytes:
                    raise TypeError(f"values must be bytes or None, got {type(v).__name__}")
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_count(topic)
        if partition is not None and not 0 <= partition < count:
            raise PartitionNotFoundError(
                f"partition {partition} of topic {topic!r} does not exist ({count} partitions)"
            )
        overhead = _RECORD_OVERHEAD
        if type(None) in value_types:
            sizes = [overhead if v is None else len(v) + overhead for v in values]
        else:
            sizes = list(map(overhead.__add__, map(len, cast("Sequence[bytes]", values))))
        key_list: Sequence[bytes | None] = keys if keys is not None else [None] * n
        if keys is not None:
            for i, k in enumerate(keys):
                if k is not None:
                    if k.__class__ is not bytes:
                        raise TypeError(f"keys must be bytes or None, got {type(k).__name__}")
                    sizes[i] += len(k)
        if keys is not None and partition is None and any(k is not None for k in keys):
            # Keyed records spread over partitions: queue each partition's share in order.
            groups: dict[int | None, list[int]] = {}
            hashes = self._key_hashes
            for i, k in enumerate(keys):
                if k is None:
                    target = None
                else:
                    hashed = hashes.get(k)
                    if hashed is None:
                        hashed = self._hash_key(k)
                    target = hashed % count
                groups.setdefault(target, []).append(i)
            segments: list[tuple[_Batch, int, int]] = []
            order: list[tuple[int, int]] = []  # (index in values, position in segments output)
            for target, indices in groups.items():
                part = self.produce_many(
                    topic,
                    [values[i] for i in indices],
                    [key_list[i] for i in indices],
                    partition=target if target is not None else None,
                )
                base = sum(c for _, _, c in segments)
                order.extend((i, base + j) for j, i in enumerate(indices))
                segments.extend(part._segments)
            if len(groups) == 1:
                return BulkDeliveryFuture(segments)
            return _ReorderedBulkFuture(segments, [pos for _, pos in sorted(order)])
        segments = []
        cumulative = list(accumulate(sizes, initial=0))  # bytes of records 0..i-1 at [i]
        with self._lock:
            if self._closed:
                raise ProducerClosedError("produce_many() on a closed producer")
            i = 0
            while i < n:
                if self._pending_bytes >= self._buffer_memory:
                    self._wait_for_buffer()
                if partition is None:
                    batch = self._sticky_open.get(topic)
                    if batch is None or batch.sealed:
                        if batch is not None:
                            self._sticky.on_batch_complete(topic, count)
                        batch = self._open_batch(topic, self._sticky.partition(topic, count))
                        self._sticky_open[topic] = batch
                else:
                    batch = self._open_batch(topic, partition)
                # Records i..j-1 fill the batch's room (a lone oversized record gets an empty
                # batch of its own): found by bisecting the running sizes, not record by record.
                room = self._batch_limit - batch.size
                j = bisect_right(cumulative, cumulative[i] + room, i, n + 1) - 1
                if j == i and not batch.values:
                    j = i + 1
                taken = cumulative[j] - cumulative[i]
                if j == i:  # this batch is full: seal it and continue in a fresh one
                    self._seal(batch)
                    continue
                start = len(batch.values)
                if keys is not None or batch.keys is not None:
                    batch_keys, batch_headers = batch.add_columns()
                    batch_keys.extend(key_list[i:j])
                    batch_headers.extend([()] * (j - i))
                batch.values.extend(values[i:j])
                if batch.timestamps is not None:
                    batch.timestamps.extend([batch.timestamp] * (j - i))
                batch.size += taken
                self._pending_bytes += taken
                segments.append((batch, start, j - i))
                if j < n or batch.size >= self._batch_limit:
                    self._seal(batch)
                i = j
        return BulkDeliveryFuture(segments)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued and wait for the outcome; returns how many batches are still
        unfinished (0 when all were delivered or failed before ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._unfinished:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._cond.wait(remaining)
                return self._unfinished
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), then stop the sender and close connections."""
        with self._lock:
            if self._closed:
                return
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sender.join(timeout=5)
        self._workers.shutdown(wait=True)
        for client in self._clients:
            client.close()

    def __len__(self) -> int:
        """Batches produced but not yet acknowledged or failed."""
        return self._unfinished

    # -- metadata -----------------------------------------------------------------------------

    def _client(self) -> BrokerClient:
        return self._clients[self._client_index % len(self._clients)]

    def _rotate(self) -> None:
        self._client_index += 1

    def _partition_count(self, topic: str) -> int:
        """Fetch ``topic``'s partition count (the sender refreshes it every metadata.max.age.ms).

        Each bootstrap server is tried in turn; the last connection error is raised if none
        answers.
        """
        for attempt in range(len(self._clients)):
            try:
                count = len(self._client().list_partitions(topic))
                break
            except httpx.TransportError:
                if attempt == len(self._clients) - 1:
                    raise
                self._rotate()
        self._partition_counts[topic] = count
        self._partitions_fetched[topic] = time.monotonic()
        return count

    def _hash_key(self, key: bytes) -> int:
        """``murmur2(key) & 0x7fffffff``, remembered: keys repeat (customers, devices), and the
        pure-Python hash costs more than the rest of ``produce()``."""
        hashed = murmur2(key) & 0x7FFFFFFF
        if len(self._key_hashes) >= _KEY_HASH_CACHE:
            self._key_hashes.clear()
        self._key_hashes[key] = hashed
        return hashed

    def _refresh_metadata(self) -> None:
        max_age = self.config.metadata_max_age_ms / 1000
        now = time.monotonic()
        for topic, fetched in list(self._partitions_fetched.items()):
            if now - fetched >= max_age:
                try:
                    self._partition_count(topic)
                except Exception as exc:  # keep the known count; produce() still works
                    log.warning("metadata refresh for %r failed: %s", topic, exc)
                    self._partitions_fetched[topic] = now

    def _open_batch(self, topic: str, partition: int) -> _Batch:
        """The open batch of ``(topic, partition)``, created if none. Called with the lock held."""
        batch = self._open.get((topic, partition))
        if batch is None:
            batch = _Batch(topic, partition, time.monotonic(), self._linger)
            self._open[(topic, partition)] = batch
            self._unfinished += 1
            self._cond.notify_all()  # the sender needs this batch's linger deadline
        return batch

    def _seal(self, batch: _Batch) -> None:
        """Close ``batch`` to appends and queue it for sending. Called with the lock held."""
        batch.sealed = True
        del self._open[(batch.topic, batch.partition)]
        self._ready.append(batch)
        self._cond.notify_all()

    def _wait_for_buffer(self) -> None:
        # Called with the lock held: block until the sender frees buffer.memory, as Kafka's.
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        self._flushing += 1  # push out lingering batches: they hold the memory we wait for
        self._cond.notify_all()
        try:
            while self._pending_bytes >= self.config.buffer_memory:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"buffer.memory ({self.config.buffer_memory} bytes) full for "
                        f"max.block.ms ({self.config.max_block_ms})"
                    )
                self._cond.wait(remaining)
        finally:
            self._flushing -= 1

    # -- sender -------------------------------------------------------------------------------

    def _run_sender(self) -> None:
        while True:
            self._refresh_metadata()
            with self._cond:
                sendable = self._collect_sendable()
                while not sendable:
                    if self._closed and not self._unfinished:
                        return
                    self._cond.wait(self._next_wakeup())
                    sendable = self._collect_sendable()
            for group in sendable:
                self._dispatch(group)

    def _next_wakeup(self) -> float | None:
        if not self._open:
            return None
        earliest = min(batch.deadline for batch in self._open.values())
        return max(earliest - time.monotonic(), 0.0005)

    def _collect_sendable(self) -> list[list[_Batch]]:
        """Seal lingered batches, then group ready ones into requests that may go now.

        A request carries consecutive ready batches of one partition (the batch path takes
        several concatenated), so batches that queued up behind an in-flight request leave
        together in one round trip. Called with the lock held.
        """
        now = time.monotonic()
        if self._open:
            flushing = self._flushing or self._closed
            for batch in [b for b in self._open.values() if flushing or b.deadline <= now]:
                self._seal(batch)
        groups: dict[tuple[str, int], list[_Batch]] = {}
        sizes: dict[tuple[str, int], int] = {}
        kept: deque[_Batch] = deque()
        blocked: set[tuple[str, int]] = set()
        for batch in self._ready:
            tp = (batch.topic, batch.partition)
            group = groups.get(tp)
            if group is not None and sizes[tp] + batch.size <= _MAX_REQUEST_BYTES:
                group.append(batch)
                sizes[tp] += batch.size
            elif (
                group is None
                and tp not in blocked
                and self._in_flight.get(tp, 0) < self._per_partition_limit
            ):
                groups[tp] = [batch]
                sizes[tp] = batch.size
                self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
            else:
                # Batches of one partition leave in order: once one waits, later ones wait too.
                blocked.add(tp)
                kept.append(batch)
        self._ready = kept
        return list(groups.values())

    def _dispatch(self, group: list[_Batch]) -> None:
        if self.config.enable_idempotence:
            try:
                producer_id, epoch = self._producer_identity(group[0])
            except Exception as exc:  # the batches carry the error to their futures
                self._finish(group, [], exc)
                return
            tp = (group[0].topic, group[0].partition)
            with self._lock:
                sequence = self._sequences.get(tp, 0)
                for batch in group:
                    if batch.encoded is None:
                        batch.identity = (producer_id, epoch, sequence)
                        sequence = (sequence + len(batch.values)) & 0x7FFFFFFF
                self._sequences[tp] = sequence
        self._workers.submit(self._send, group)

    def _producer_identity(self, batch: _Batch) -> tuple[ProducerId, ProducerEpoch]:
        """The producer id and epoch, fetched once (retried like a batch until its deadline)."""
        identity = self._identity
        if identity is not None:
            return identity
        deadline = batch.created + self.config.delivery_timeout_ms / 1000
        # One fetch at a time: sequences count from 0 under each new id, so two threads must not
        # each install an id of their own.
        with self._identity_lock:
            while self._identity is None:
                try:
                    identity = self._client().init_producer()
                except Exception as exc:
                    if not _retriable(exc) or time.monotonic() >= deadline:
                        raise
                    self._rotate()
                    time.sleep(self.config.retry_backoff_ms / 1000)
                    continue
                with self._lock:
                    self._identity = identity
                    self._sequences.clear()
            return self._identity

    def _encode(self, batch: _Batch) -> bytes:
        if batch.encoded is None:
            producer_id, epoch, sequence = batch.identity
            if batch.keys is None and batch.timestamps is None:
                batch.encoded = encode_values_batch(
                    batch.values,
                    compression=self.config.compression,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    timestamp_ms=batch.timestamp,
                )
            else:
                keys, headers = batch.add_columns()
                batch.encoded = encode_batch(
                    list(zip(keys, batch.values, headers, strict=True)),
                    compression=self.config.compression,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    timestamp_ms=batch.timestamp,
                    timestamps=batch.timestamps,
                )
        return batch.encoded

    def _send(self, group: list[_Batch]) -> None:
        """POST ``group``'s batches as one request; retry the same bytes until acknowledged."""
        cfg = self.config
        first = group[0]
        deadline = first.created + cfg.delivery_timeout_ms / 1000
        attempts = 0
        renumbered = False
        try:
            body = b"".join([self._encode(batch) for batch in group])
            while True:
                try:
                    acks = self._client().produce_batches(
                        first.topic, first.partition, body, acks=cfg.acks
                    )
                except UnknownProducerIdError:
                    # The broker forgot this producer id (unused past its expiration): nothing
                    # sent under it can be deduplicated any more, so, as Kafka's producer does,
                    # take a new id and renumber these batches from the partition's new sequence.
                    if not cfg.enable_idempotence or renumbered:
                        raise
                    renumbered = True
                    body = self._renumber(group)
                    continue
                except Exception as exc:
                    attempts += 1
                    if not _retriable(exc) or attempts > cfg.retries:
                        raise
                    if time.monotonic() + cfg.retry_backoff_ms / 1000 >= deadline:
                        raise DeliveryTimeoutError(
                            f"batch for {first.topic}-{first.partition} not acknowledged within "
                            f"delivery.timeout.ms ({cfg.delivery_timeout_ms}); last error: {exc}"
                        ) from exc
                    log.debug("retrying batch for %s-%s: %s", first.topic, first.partition, exc)
                    if isinstance(exc, httpx.TransportError):
                        self._rotate()
                    time.sleep(cfg.retry_backoff_ms / 1000)
                    continue
                self._finish(group, acks, None)
                return
        except Exception as exc:  # delivered to the batches' futures and callbacks
            if self.config.enable_idempotence:
                # The broker may or may not hold these sequences now: start a fresh producer id
                # so later batches of this partition do not hit a sequence gap.
                with self._lock:
                    self._identity = None
                    self._sequences.clear()
            self._finish(group, [], exc)

    def _renumber(self, group: list[_Batch]) -> bytes:
        """Give ``group`` a fresh producer identity and sequences; return its new encoding."""
        stale = group[0].identity[:2]
        with self._lock:
            if self._identity is not None and tuple(self._identity) == stale:
                self._identity = None
                self._sequences.clear()
        producer_id, epoch = self._producer_identity(group[0])
        tp = (group[0].topic, group[0].partition)
        with self._lock:
            sequence = self._sequences.get(tp, 0)
            for batch in group:
                batch.identity = (producer_id, epoch, sequence)
                batch.encoded = None
                sequence = (sequence + len(batch.values)) & 0x7FFFFFFF
            self._sequences[tp] = sequence
        return b"".join([self._encode(batch) for batch in group])

    def _finish(
        self, group: list[_Batch], acks: list[BatchAck], error: BaseException | None
    ) -> None:
        with self._cond:
            tp = (group[0].topic, group[0].partition)
            self._in_flight[tp] -= 1
            self._cond.notify_all()
        for i, batch in enumerate(group):
            self._complete(batch, acks[i] if i < len(acks) else None, error)

    def _complete(self, batch: _Batch, ack: BatchAck | None, error: BaseException | None) -> None:
        if error is None:
            if ack is not None:
                batch.metadata_offset = ack.base_offset
                if ack.log_append_time >= 0:
                    batch.metadata_timestamp = ack.log_append_time
        elif not isinstance(error, HeadwaterError | TimeoutError | httpx.HTTPError):
            error = UnknownServerError(f"producer failed: {type(error).__name__}: {error}")
        batch.error = error
        batch.encoded = None
        with self._cond:
            self._unfinished -= 1
            self._pending_bytes -= batch.size
            batch.done.set()
            self._cond.notify_all()
        for index, callback in batch.callbacks:
            try:
                callback(error, None if error else _metadata(batch, index))
            except Exception:
                log.exception("on_delivery callback failed")
        while batch.waiters:
            try:
                index, fn = batch.waiters.pop()
            except IndexError:
                break
            try:
                fn(DeliveryFuture(batch, index))
            except Exception:
                log.exception("delivery future callback failed")


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, str or None, got {type(data).__name__}")


def _normalize_headers(
    headers: Headers | Mapping[str, bytes | str | None],
) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header names are str, got {name!r}")
        out.append((name, value.encode() if isinstance(value, str) else value))
    return out
