"""The producer's caller side: records checked, given a partition and appended to open batches.

``produce()`` and ``produce_many()`` (the public API of ``Producer``, which is this class plus
the sender) turn records into appends: an explicit partition wins, a key is hashed as Kafka's
Java client does, and records without a key join the topic's sticky batch. A batch is sealed --
closed to appends and queued as ready -- when it reaches ``batch.size``, when ``linger.ms`` has
passed since its first record, or on ``flush()``. The sender takes ready batches grouped into
requests (:meth:`RecordAccumulator.wait_for_requests`) and hands each batch back when its
outcome is known (:meth:`RecordAccumulator.release`), which frees its bytes of ``buffer.memory``
and counts it finished for ``flush()``.

One lock guards all of it; the sender waits on its condition for batches to linger out.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import NamedTuple, cast

from headwater.config import ProducerConfig
from headwater.errors import PartitionNotFoundError
from headwater.producer.batch import ProducerBatch
from headwater.producer.futures import BatchSlice, BulkDeliveryFuture, DeliveryFuture
from headwater.producer.metadata import PartitionCounts
from headwater.producer.reports import DeliveryReportCallback, DeliveryReports
from headwater.records.header import HEADER_SIZE
from headwater.records.partitioner import StickyPartitioner, murmur2

Headers = Sequence[tuple[str, bytes | str | None]]

# Largest request the sender builds from queued batches of one partition (the broker's default
# BROKER_MAX_REQUEST_BYTES is 64 MiB).
_MAX_REQUEST_BYTES = 16 * 1_048_576
# Most batches of one partition an idempotent producer's request carries: a partition remembers
# the last 5 batches of each producer (Kafka's window, which is also why Kafka allows at most 5
# in flight), and a request retried after a failover must find every one of its batches there,
# or its first batches look like a sequence gap rather than duplicates.
_MAX_IDEMPOTENT_BATCHES = 5
# Bytes a record adds to a batch beyond its key and value (length, attributes, deltas, lengths):
# an upper bound for values under 8 KiB with small headers, so a batch stays under batch.size.
_RECORD_OVERHEAD = 16
_BYTES_OR_NONE = frozenset((bytes, type(None)))
_KEY_HASH_CACHE = 65_536  # distinct keys whose murmur2 hash is remembered


class ProducerClosedError(RuntimeError):
    """produce() was called on a closed producer."""


class ProduceRequest(NamedTuple):
    """Ready batches of one partition that leave in one request, in order."""

    topic: str
    partition: int
    batches: list[ProducerBatch]


class RecordAccumulator:
    """Appends records to open batches and counts what ``flush()`` waits for; its sender sees
    it through :class:`ReadyBatches`. ``metadata`` gives the partition counts partitioning needs.

    ``Producer`` extends this class rather than holding one: ``produce()`` runs once per record,
    and one more Python call on that path would cost about a tenth of it.
    """

    def __init__(self, config: ProducerConfig, metadata: PartitionCounts) -> None:
        self._linger = config.linger_ms / 1000
        # Records may fill batch.size minus the batch header; a record larger than that gets a
        # batch of its own (and the broker's max.message.bytes decides).
        self._batch_limit = config.batch_size - HEADER_SIZE
        self._buffer_memory = config.buffer_memory
        self._max_block_ms = config.max_block_ms
        # An idempotent producer has one request in flight per partition: HTTP/1.1 sends
        # in-flight requests on separate connections, which may overtake each other.
        self._per_partition_limit = 1 if config.enable_idempotence else config.max_in_flight
        self._batches_per_request = (
            _MAX_IDEMPOTENT_BATCHES if config.enable_idempotence else _MAX_REQUEST_BYTES
        )
        self._metadata = metadata
        self._counts: Mapping[str, int] = metadata.known
        self._key_hashes: dict[bytes, int] = {}
        self._sticky = StickyPartitioner(config.batch_size)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        self._sticky_open: dict[str, ProducerBatch] = {}
        self._ready: deque[ProducerBatch] = deque()
        self._in_flight: dict[tuple[str, int], int] = {}
        self._unfinished = 0
        self._records_unacked = 0  # records in unfinished batches: len(producer) counts them
        self._reports = DeliveryReports()
        self._pending_bytes = 0
        self._flushing = 0
        self._closed = False

    # -- appending ----------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        on_delivery: DeliveryReportCallback | None = None,
        timestamp: int = 0,
        headers: Headers | Mapping[str, bytes | str | None] | None = None,
        *,
        callback: DeliveryReportCallback | None = None,
    ) -> DeliveryFuture:
        """Queue one record; see the Producer contract. The parameters are confluent-kafka's:
        ``partition`` -1 lets the partitioner choose; ``timestamp`` 0 is the batch's time;
        ``callback`` is another name for ``on_delivery``."""
        # The hot path of every producing application: each step costs an `is` test or two when
        # the record does not need it (bytes value; no key, headers, partition or timestamp).
        chosen: int | None = None if partition < 0 else partition
        if callback is not None:
            if on_delivery is not None:
                raise TypeError("produce() takes on_delivery or callback, not both")
            on_delivery = callback
        if value.__class__ is not bytes and value is not None:
            value = _as_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")
        size = _RECORD_OVERHEAD if value is None else len(value) + _RECORD_OVERHEAD
        # None, not (): `is` tests are cheapest.
        record_headers: list[tuple[str, bytes | None]] | None = None
        if headers is not None:
            record_headers = _normalize_headers(headers) or None
            if record_headers is not None:
                size += sum(len(k) + len(v or b"") + 2 for k, v in record_headers)
        counts = self._counts
        if topic not in counts:
            self._metadata.fetch(topic)
        if key is not None:
            size += len(key)
            if chosen is None:
                hashed = self._key_hashes.get(key)
                if hashed is None:
                    hashed = self._hash_key(key)
                chosen = hashed % counts[topic]
            elif not 0 <= chosen < counts[topic]:
                self._check_partition(topic, chosen)
        elif chosen is not None and not 0 <= chosen < counts[topic]:
            self._check_partition(topic, chosen)
        with self._lock:
            if self._closed:
                raise ProducerClosedError("produce() on a closed producer")
            if self._pending_bytes >= self._buffer_memory:
                self._wait_for_buffer()
            if chosen is None:
                batch = self._sticky_open.get(topic)
                if batch is None or batch.sealed or batch.size + size > self._batch_limit:
                    batch = self._next_sticky_batch(topic, batch, counts[topic])
            else:
                batch = self._open.get((topic, chosen))
                if batch is None or (batch.size + size > self._batch_limit and batch.values):
                    batch = self._next_batch(topic, chosen, batch)
            values = batch.values
            index = len(values)
            if key is not None or record_headers is not None or batch.keyed is not None:
                keyed = batch.keyed_columns()
                keyed.keys.append(key)
                keyed.headers.append(() if record_headers is None else record_headers)
            values.append(value)
            if timestamp or batch.timestamps is not None:
                if batch.timestamps is None:
                    batch.timestamps = [batch.timestamp] * index
                batch.timestamps.append(timestamp or batch.timestamp)
            if on_delivery is not None:
                batch.callbacks.append(
                    self._reports.expect(
                        on_delivery, topic, batch.partition, key, value, record_headers
                    )
                )
                batch.callback_indices.append(index)
            self._records_unacked += 1
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
        partition: int = -1,
    ) -> BulkDeliveryFuture:
        """Queue many records at once: ``values[i]`` with ``keys[i]`` (no headers, batch time),
        to ``partition`` (-1: the partitioner chooses).

        The same contract as ``produce()`` (partitioning, ordering, idempotence), with the
        per-call overhead paid once: for bulk loads, replays and benchmarks. Values and keys
        must be ``bytes`` or ``None``.
        """
        chosen: int | None = None if partition < 0 else partition
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} values")
        value_types = set(map(type, values))  # checked without a Python step per record
        if not value_types <= _BYTES_OR_NONE:
            for v in values:
                if v is not None and v.__class__ is not bytes:
                    raise TypeError(f"values must be bytes or None, got {type(v).__name__}")
        count = self._counts.get(topic)
        if count is None:
            count = self._metadata.fetch(topic)
        if chosen is not None and not 0 <= chosen < count:
            raise PartitionNotFoundError(
                f"partition {chosen} of topic {topic!r} does not exist ({count} partitions)"
            )
        overhead = _RECORD_OVERHEAD
        if type(None) in value_types:
            sizes = [overhead if v is None else len(v) + overhead for v in values]
        else:
            sizes = list(map(overhead.__add__, map(len, cast("Sequence[bytes]", values))))
        if keys is not None:
            for i, k in enumerate(keys):
                if k is not None:
                    if k.__class__ is not bytes:
                        raise TypeError(f"keys must be bytes or None, got {type(k).__name__}")
                    sizes[i] += len(k)
            if chosen is None and any(k is not None for k in keys):
                return self._produce_keyed(topic, values, keys=keys, sizes=sizes, count=count)
        return BulkDeliveryFuture(
            self._append_many(topic, chosen, values, keys=keys, sizes=sizes, count=count)
        )

    def _produce_keyed(
        self,
        topic: str,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None],
        sizes: Sequence[int],
        count: int,
    ) -> BulkDeliveryFuture:
        """produce_many() of keyed records spread over partitions: each partition's share is
        queued in order (null keys go sticky); the future answers in the order given."""
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
        slices: list[BatchSlice] = []
        order: list[tuple[int, int]] = []  # (index in values, position in the slices' records)
        queued = 0
        for target, indices in groups.items():
            slices += self._append_many(
                topic,
                target,
                [values[i] for i in indices],
                keys=[keys[i] for i in indices],
                sizes=[sizes[i] for i in indices],
                count=count,
            )
            order.extend((i, queued + j) for j, i in enumerate(indices))
            queued += len(indices)
        if len(groups) == 1:
            return BulkDeliveryFuture(slices)
        return BulkDeliveryFuture(slices, [pos for _, pos in sorted(order)])

    def _check_partition(self, topic: str, partition: int) -> None:
        """Raise PartitionNotFoundError unless ``partition`` exists, refetching the count first:
        the topic may have grown since it was cached."""
        count = self._metadata.fetch(topic)
        if not 0 <= partition < count:
            raise PartitionNotFoundError(
                f"partition {partition} of topic {topic!r} does not exist ({count} partitions)"
            )

    def _hash_key(self, key: bytes) -> int:
        """``murmur2(key) & 0x7fffffff``, remembered: keys repeat (customers, devices), and the
        pure-Python hash costs more than the rest of ``produce()``."""
        hashed = murmur2(key) & 0x7FFFFFFF
        if len(self._key_hashes) >= _KEY_HASH_CACHE:
            self._key_hashes.clear()
        self._key_hashes[key] = hashed
        return hashed

    def _append_many(
        self,
        topic: str,
        partition: int | None,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None,
        sizes: Sequence[int],
        count: int,
    ) -> list[BatchSlice]:
        """Append records ``values[i]`` (with ``keys[i]``, ``sizes[i]`` bytes) to one partition,
        or sticky batches when ``partition`` is None; the slices of batches they went into."""
        n = len(values)
        slices: list[BatchSlice] = []
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
                        batch = self._next_sticky_batch(topic, batch, count)
                else:
                    batch = self._open_batch(topic, partition)
                # Records i..j-1 fill the batch's room (a lone oversized record gets an empty
                # batch of its own): found by bisecting the running sizes, not record by record.
                room = self._batch_limit - batch.size
                j = bisect_right(cumulative, cumulative[i] + room, i, n + 1) - 1
                if j == i and not batch.values:
                    j = i + 1
                if j == i:  # this batch is full: seal it and continue in a fresh one
                    self._seal(batch)
                    continue
                taken = cumulative[j] - cumulative[i]
                start = len(batch.values)
                if keys is not None or batch.keyed is not None:
                    keyed = batch.keyed_columns()
                    keyed.keys.extend(keys[i:j] if keys is not None else [None] * (j - i))
                    keyed.headers.extend([()] * (j - i))
                batch.values.extend(values[i:j])
                if batch.timestamps is not None:
                    batch.timestamps.extend([batch.timestamp] * (j - i))
                batch.size += taken
                self._pending_bytes += taken
                self._records_unacked += j - i
                slices.append(BatchSlice(batch, start, j - i))
                if j < n or batch.size >= self._batch_limit:
                    self._seal(batch)
                i = j
        return slices

    def _next_sticky_batch(
        self, topic: str, batch: ProducerBatch | None, count: int
    ) -> ProducerBatch:
        """A new sticky batch for ``topic`` after ``batch`` (the current one; None if none).

        Sticky: unkeyed records join the topic's current sticky batch while it is open; once it
        is sealed (batch.size reached or lingered out) another partition is chosen, which
        spreads load by bytes as KIP-794 does. Called with the lock held.
        """
        if batch is None:
            chosen = self._sticky.partition(topic, count)
        else:
            if not batch.sealed:
                self._seal(batch)
            self._sticky.on_batch_complete(topic, count)
            chosen = self._sticky.partition(topic, count)
        batch = self._open_batch(topic, chosen)
        self._sticky_open[topic] = batch
        return batch

    def _next_batch(self, topic: str, partition: int, batch: ProducerBatch | None) -> ProducerBatch:
        """A batch with room after ``batch`` (the partition's open one, full; None if none)."""
        if batch is not None:
            self._seal(batch)
        return self._open_batch(topic, partition)

    def _open_batch(self, topic: str, partition: int) -> ProducerBatch:
        """The open batch of ``(topic, partition)``, created if none. Called with the lock held."""
        batch = self._open.get((topic, partition))
        if batch is None:
            batch = ProducerBatch(topic, partition, time.monotonic(), self._linger)
            self._open[(topic, partition)] = batch
            self._unfinished += 1
            self._cond.notify_all()  # the sender needs this batch's linger deadline
        return batch

    def _seal(self, batch: ProducerBatch) -> None:
        """Close ``batch`` to appends and queue it for sending. Called with the lock held."""
        batch.sealed = True
        del self._open[(batch.topic, batch.partition)]
        self._ready.append(batch)
        self._cond.notify_all()

    def _wait_for_buffer(self) -> None:
        # Called with the lock held: block until the sender frees buffer.memory, as Kafka's.
        deadline = time.monotonic() + self._max_block_ms / 1000
        self._flushing += 1  # push out lingering batches: they hold the memory we wait for
        self._cond.notify_all()
        try:
            while self._pending_bytes >= self._buffer_memory:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"buffer.memory ({self._buffer_memory} bytes) full for "
                        f"max.block.ms ({self._max_block_ms})"
                    )
                self._cond.wait(remaining)
        finally:
            self._flushing -= 1

    # -- flush and close ----------------------------------------------------------------------

    def _flush_batches(self, timeout: float | None = None) -> int:
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

    def _stop_appends(self) -> None:
        """Refuse further records; the sender stops once every batch is released."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class ReadyBatches:
    """The accumulator as its sender sees it: requests to send, and batches to hand back."""

    def __init__(self, accumulator: RecordAccumulator) -> None:
        self._acc = accumulator

    def wait_for_requests(self) -> list[ProduceRequest] | None:
        """Block until some requests may go now, and return them; None once closed and every
        batch is released (the sender then stops)."""
        acc = self._acc
        with acc._cond:
            requests = self._collect_requests()
            while not requests:
                if acc._closed and not acc._unfinished:
                    return None
                acc._cond.wait(self._next_wakeup())
                requests = self._collect_requests()
            return requests

    def _next_wakeup(self) -> float | None:
        acc = self._acc
        if not acc._open:
            return None
        earliest = min(batch.deadline for batch in acc._open.values())
        return max(earliest - time.monotonic(), 0.0005)

    def _collect_requests(self) -> list[ProduceRequest]:
        """Seal lingered batches, then group ready ones into requests that may go now.

        A request carries consecutive ready batches of one partition (the batch path takes
        several concatenated), so batches that queued up behind an in-flight request leave
        together in one round trip. Called with the lock held.
        """
        acc = self._acc
        now = time.monotonic()
        if acc._open:
            flushing = acc._flushing or acc._closed
            for batch in [b for b in acc._open.values() if flushing or b.deadline <= now]:
                acc._seal(batch)
        groups: dict[tuple[str, int], list[ProducerBatch]] = {}
        sizes: dict[tuple[str, int], int] = {}
        kept: deque[ProducerBatch] = deque()
        blocked: set[tuple[str, int]] = set()
        for batch in acc._ready:
            tp = (batch.topic, batch.partition)
            group = groups.get(tp)
            if (
                group is not None
                and sizes[tp] + batch.size <= _MAX_REQUEST_BYTES
                and len(group) < acc._batches_per_request
            ):
                group.append(batch)
                sizes[tp] += batch.size
            elif (
                group is None
                and tp not in blocked
                and acc._in_flight.get(tp, 0) < acc._per_partition_limit
            ):
                groups[tp] = [batch]
                sizes[tp] = batch.size
                acc._in_flight[tp] = acc._in_flight.get(tp, 0) + 1
            else:
                # Batches of one partition leave in order: once one waits, later ones wait too.
                blocked.add(tp)
                kept.append(batch)
        acc._ready = kept
        return [
            ProduceRequest(topic, partition, group) for (topic, partition), group in groups.items()
        ]

    def request_done(self, request: ProduceRequest) -> None:
        """``request`` was answered or failed: its partition may send the next one."""
        acc = self._acc
        with acc._cond:
            acc._in_flight[(request.topic, request.partition)] -= 1
            acc._cond.notify_all()

    def release(self, batch: ProducerBatch) -> None:
        """``batch``'s outcome is set: free its bytes, count it finished and mark it done (in that
        order, under the lock, so a ``flush()`` that returns sees every future done)."""
        acc = self._acc
        with acc._cond:
            acc._unfinished -= 1
            acc._records_unacked -= len(batch.values)
            acc._pending_bytes -= batch.size
            batch.done.set()
            acc._cond.notify_all()


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
