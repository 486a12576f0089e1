"""One partition's log: ordered segments, offset assignment, reads, retention and recovery.

Offsets start at 0, only grow and are never reused: the active (last) segment is never deleted
-- when retention expires everything, a new empty active segment is rolled at the log end offset
first -- and its file name carries that offset across restarts. The log start offset (first
readable offset) is checkpointed in ``log-start-offset``. Layout of the directory: see segment.py.

What runs on the event loop, what in threads, and how appends are serialised and synced: the
threading policy in ``headwater_broker.broker``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from headwater.errors import OffsetOutOfRangeError, StorageError, TopicNotFoundError
from headwater.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    decode_batch,
    parse_header,
    set_base_offset,
    set_log_append_time,
)
from headwater.types import Offset, PartitionId, TimestampMs
from headwater_broker.log.producer_state import (
    ProducerEntry,
    ProducerStateTable,
    StoredBatch,
    snapshot_offsets,
)
from headwater_broker.log.segment import Segment, WrittenBatch
from headwater_broker.topic_config import TopicConfig

log = logging.getLogger("headwater.broker.partition")

FsyncPolicy = Literal["always", "interval", "never"]
"""When appended bytes are fdatasynced: before the append is answered (and readable), every
``BROKER_FSYNC_INTERVAL_MS`` in the background, or only when a segment rolls or closes."""
LOG_START_FILE = "log-start-offset"
_MAX_IOV = 512  # stay well below IOV_MAX (1024) for one pwritev


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where one batch of an append request landed."""

    base_offset: Offset
    last_offset: Offset
    log_append_time: TimestampMs  # -1 unless the topic uses LogAppendTime
    duplicate: bool


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole stored batches read from a partition, and the partition's bounds at that moment."""

    data: bytes
    records: int  # records in the returned batches (some may precede the asked offset)
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


def fsync_directory(path: Path) -> None:
    """Make file creations, renames and deletions in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLog:
    """The segmented log of one topic partition."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        fsync: FsyncPolicy,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.fsync = fsync
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = Offset(0)
        self.log_end_offset = Offset(0)  # next offset to assign (written, maybe not yet synced)
        self.high_watermark = Offset(0)  # next offset readers may see
        self.producers = ProducerStateTable()
        self.lock = asyncio.Lock()
        self._waiter: asyncio.Future[None] | None = None
        self._sync_task: asyncio.Task[None] | None = None
        self.closed = False
        self.deleted = False

    # --- opening and recovery ----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        fsync: FsyncPolicy,
    ) -> PartitionLog:
        """Open (creating if needed) a partition directory, recovering from any crash."""
        plog = cls(directory, topic, partition, config, fsync)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):
            stale.unlink(missing_ok=True)
        checkpoint = plog._read_log_start()
        bases = sorted(
            int(p.name[:20])
            for p in directory.glob("*.log")
            if len(p.name) == 24 and p.name[:20].isdigit()
        )
        if not bases:
            bases = [checkpoint]
        for base, next_base in itertools.pairwise(bases):
            plog.segments.append(
                Segment.open_closed(directory, base, next_base, config.index_interval_bytes)
            )
        active, active_headers = Segment.recover_active(
            directory, bases[-1], config.index_interval_bytes
        )
        plog.segments.append(active)
        plog._bases = [s.base_offset for s in plog.segments]
        plog.log_end_offset = plog.high_watermark = Offset(active.next_offset)
        plog.log_start_offset = Offset(
            min(max(checkpoint, plog.segments[0].base_offset), plog.log_end_offset)
        )
        plog._recover_producers(active_headers)
        return plog

    def _recover_producers(self, active_headers: list[BatchHeader]) -> None:
        end = self.log_end_offset
        offsets = snapshot_offsets(self.directory)
        start = -1
        for offset in reversed(offsets):
            path = self.directory / f"{offset:020d}.snapshot"
            if offset > end:
                path.unlink(missing_ok=True)  # describes batches a crash cut off
                continue
            if start < 0:
                loaded = ProducerStateTable.load_snapshot(path)
                if loaded is not None:
                    self.producers, start = loaded
        start = max(start, 0)
        for segment in self.segments[:-1]:
            if segment.next_offset > start:
                self.producers.replay(h for _pos, h in segment.headers() if h.base_offset >= start)
        self.producers.replay(h for h in active_headers if h.base_offset >= start)

    def _read_log_start(self) -> int:
        try:
            return int((self.directory / LOG_START_FILE).read_text().strip())
        except (OSError, ValueError):
            return 0

    def _write_log_start(self) -> None:
        path = self.directory / LOG_START_FILE
        tmp = path.with_name(LOG_START_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{self.log_start_offset}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(self.directory)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # --- appending ---------------------------------------------------------------------------

    async def append(
        self, buf: bytearray, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> list[AppendResult]:
        """Append validated batches (``(position in buf, header)``), assigning their offsets.

        Producer sequence and epoch rules are checked for every batch before anything is
        written, so a rejected request changes nothing. ``buf`` is modified in place.
        """
        async with self.lock:
            if self.closed:
                raise self._closed_error()
            results, writes = self._plan(batches, now_ms)
            if writes:
                self._write(buf, batches, writes, now_ms)
            written = self.log_end_offset
        if self.fsync == "always":
            # Outside the lock: appends that arrive meanwhile are written and share the next
            # fdatasync (group commit). Duplicates wait too: their original may be unsynced.
            await self._sync_until(written)
        return results

    async def _sync_until(self, offset: int) -> None:
        """Return once everything below ``offset`` is fdatasynced and visible to readers."""
        while self.high_watermark < offset:
            if self._sync_task is None:
                self._sync_task = asyncio.create_task(self._sync())
            await asyncio.shield(self._sync_task)

    async def _sync(self) -> None:
        """One fdatasync of the active segment covering every byte written so far."""
        segment, end = self.active, self.log_end_offset
        try:
            await asyncio.to_thread(segment.flush)
        except OSError as exc:
            # Not acknowledged and not visible; a later successful sync covers these bytes.
            raise StorageError(f"fsync of {segment.log_path}: {exc}") from exc
        finally:
            self._sync_task = None
        self._publish(end)

    def _closed_error(self) -> Exception:
        if self.deleted:
            return TopicNotFoundError(f"Topic '{self.topic}' was deleted")
        return StorageError(f"Partition {self.topic}-{self.partition} is closed")

    def _plan(
        self, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> tuple[list[AppendResult], list[tuple[int, int, int]]]:
        """Judge producer state and assign offsets without changing anything.

        Returns the results and ``(batch index, base offset, max timestamp)`` per batch to write.
        """
        pending: dict[int, ProducerEntry] = {}
        results: list[AppendResult] = []
        writes: list[tuple[int, int, int]] = []
        next_offset: int = self.log_end_offset
        append_time = now_ms if self.config.log_append_time else -1
        for i, (_pos, header) in enumerate(batches):
            pid = header.producer_id
            if pid >= 0:
                stored = self.producers.check(
                    pending, pid, header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if stored is not None:
                    first, final = Offset(stored.base_offset), Offset(stored.last_offset)
                    results.append(AppendResult(first, final, TimestampMs(-1), True))
                    continue
                last = next_offset + header.last_offset_delta
                self.producers.pending_update(
                    pending,
                    pid,
                    header.producer_epoch,
                    StoredBatch(header.base_sequence, header.last_sequence, next_offset, last),
                    now_ms,
                )
            last = next_offset + header.last_offset_delta
            max_ts = append_time if append_time >= 0 else header.max_timestamp
            writes.append((i, next_offset, max_ts))
            results.append(
                AppendResult(Offset(next_offset), Offset(last), TimestampMs(append_time), False)
            )
            next_offset = last + 1
        return results, writes

    def _write(
        self,
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        writes: list[tuple[int, int, int]],
        now_ms: int,
    ) -> None:
        """Stamp offsets into ``buf`` and write it in as few ``pwritev`` calls as segments allow."""
        config = self.config
        view = memoryview(buf)
        if self.active.size and now_ms - self.active.created_ms > config.segment_ms:
            self._roll(now_ms)
        if not self.active.size:
            self.active.created_ms = now_ms  # segment.ms counts from the first append
        chunks: list[memoryview] = []
        accounted: list[WrittenBatch] = []
        pending: dict[int, ProducerEntry] = {}
        run_bytes = 0
        chunk_start = chunk_end = -1
        for i, base, max_ts in writes:
            pos, header = batches[i]
            size = header.size
            segment = self.active
            if (segment.size or run_bytes) and (
                segment.size + run_bytes + size > config.segment_bytes
                or segment.is_index_full(config.segment_index_bytes)
            ):
                if chunk_end > chunk_start:
                    chunks.append(view[chunk_start:chunk_end])
                self._flush_run(chunks, accounted, pending)
                chunks, accounted, run_bytes = [], [], 0
                chunk_start = chunk_end = -1
                self._roll(now_ms)
            set_base_offset(buf, pos, base)
            if config.log_append_time:
                set_log_append_time(buf, pos, now_ms)
            if pos != chunk_end:
                if chunk_end > chunk_start:
                    chunks.append(view[chunk_start:chunk_end])
                chunk_start = pos
                if len(chunks) >= _MAX_IOV:
                    self._flush_run(chunks, accounted, pending)
                    chunks, accounted, run_bytes = [], [], 0
            chunk_end = pos + size
            last = base + header.last_offset_delta
            accounted.append(WrittenBatch(run_bytes, size, base, last, max_ts))
            run_bytes += size
            if header.producer_id >= 0:
                self.producers.pending_update(
                    pending,
                    header.producer_id,
                    header.producer_epoch,
                    StoredBatch(header.base_sequence, header.last_sequence, base, last),
                    now_ms,
                )
        if chunk_end > chunk_start:
            chunks.append(view[chunk_start:chunk_end])
        self._flush_run(chunks, accounted, pending)

    def _flush_run(
        self,
        chunks: list[memoryview],
        accounted: list[WrittenBatch],
        pending: dict[int, ProducerEntry],
    ) -> None:
        if not chunks:
            return
        self.active.append(chunks, accounted, self.config.index_interval_bytes)
        self.log_end_offset = Offset(self.active.next_offset)
        # Batches now in the file are part of the log whatever happens next: commit their state.
        self.producers.commit(pending)
        pending.clear()
        if self.fsync != "always":
            self._publish(self.log_end_offset)

    def _roll(self, now_ms: int) -> None:
        """Close the active segment and start a new one at the log end offset."""
        old = self.active
        old.flush()
        old.write_indexes()
        sync = self.fsync != "never"
        self.producers.write_snapshot(self.directory, self.log_end_offset, sync=sync)
        self._prune_snapshots()
        segment = Segment.create(self.directory, self.log_end_offset)
        segment.created_ms = now_ms
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        if sync:
            fsync_directory(self.directory)

    def _prune_snapshots(self, keep: int = 2) -> None:
        for offset in snapshot_offsets(self.directory)[:-keep]:
            (self.directory / f"{offset:020d}.snapshot").unlink(missing_ok=True)

    def _publish(self, offset: int) -> None:
        """Make offsets below ``offset`` readable and wake long-polling fetches."""
        if offset <= self.high_watermark:
            return
        self.high_watermark = Offset(offset)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def flush(self) -> None:
        """fdatasync the active segment (interval policy; closed segments were synced on roll)."""
        with contextlib.suppress(OSError):
            self.active.flush()

    # --- reading -----------------------------------------------------------------------------

    def check_offset(self, offset: int) -> None:
        start, end = self.log_start_offset, self.high_watermark
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for partition {self.topic}-{self.partition}: "
                f"valid range is [{start}, {end}]"
            )

    def read(self, offset: int, max_bytes: int) -> FetchData:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (at least one)."""
        self.check_offset(offset)
        hw = self.high_watermark
        empty = FetchData(b"", 0, Offset(offset), hw, self.log_start_offset)
        if offset == hw:
            return empty
        i = bisect.bisect_right(self._bases, offset) - 1
        for segment in self.segments[max(i, 0) :]:
            found = segment.find(offset)
            if found is None:
                continue
            position, _header = found
            data = segment.read(position, max(min(max_bytes, segment.size - position), HEADER_SIZE))
            pos = records = 0
            next_offset = offset
            while pos + HEADER_SIZE <= len(data):
                header = parse_header(data, pos)
                if header.base_offset >= hw:
                    break
                if pos + header.size > len(data):
                    if pos == 0:  # the first batch alone is larger than max_bytes: send it whole
                        data = segment.read(position, header.size)
                        pos = header.size
                        records = header.records_count
                        next_offset = header.last_offset + 1
                    break
                pos += header.size
                records += header.records_count
                next_offset = header.last_offset + 1
            if pos == 0:
                return empty
            return FetchData(
                data if pos == len(data) else data[:pos],
                records,
                Offset(next_offset),
                hw,
                self.log_start_offset,
            )
        return empty

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        """Return when the high watermark passes ``offset`` or after ``timeout_s``."""
        if offset < self.high_watermark or timeout_s <= 0 or self.closed:
            return
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._waiter), timeout_s)

    def wake_waiters(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def lookup_timestamp(self, timestamp: int) -> tuple[Offset, TimestampMs] | None:
        """The earliest offset whose record timestamp is >= ``timestamp``, and that timestamp."""
        hw = self.high_watermark
        for segment in self.segments:
            if segment.max_timestamp < timestamp or segment.base_offset >= hw:
                continue
            after = segment.time_index.lookup(timestamp)
            start = max(after + 1, segment.base_offset)
            found = segment.find(start)
            if found is None:
                continue
            for position, header in segment.headers(found[0]):
                if header.base_offset >= hw:
                    return None
                if header.max_timestamp < timestamp:
                    continue
                _h, records = decode_batch(segment.read(position, header.size))
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return Offset(record.offset), TimestampMs(record.timestamp)
        return None

    # --- retention and lifecycle -------------------------------------------------------------

    def _expired(self, now_ms: int) -> int:
        """How many leading segments retention deletes now (the active one only if non-empty)."""
        config = self.config
        segments = [s for s in self.segments if s.size or s is not self.active]
        count = 0
        if config.retention_ms >= 0:
            for segment in segments:
                newest = segment.max_timestamp
                if newest < 0:
                    newest = int(os.stat(segment.log_path).st_mtime * 1000)
                if now_ms - newest <= config.retention_ms:
                    break
                count += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[count:]) - config.retention_bytes
            for segment in segments[count:]:
                if excess - segment.size < 0:
                    break
                excess -= segment.size
                count += 1
        return count

    async def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past ``retention.ms`` / ``retention.bytes``; return how many."""
        async with self.lock:
            if self.closed:
                return 0
            count = self._expired(now_ms)
            if count == 0:
                return 0
            if count >= len(self.segments):
                self._roll(now_ms)  # never delete the active segment: keep the log end offset
            doomed, self.segments = self.segments[:count], self.segments[count:]
            self._bases = self._bases[count:]
            self.log_start_offset = Offset(max(self.log_start_offset, self.segments[0].base_offset))
            self._write_log_start()
            for segment in doomed:
                segment.delete()
            log.info(
                "retention deleted %d segment(s) of %s-%d; log start offset now %d",
                count,
                self.topic,
                self.partition,
                self.log_start_offset,
            )
            return count

    def close(self) -> None:
        """Persist indexes and producer state, and close files (clean shutdown)."""
        if self.closed:
            return
        self.closed = True
        self.wake_waiters()
        with contextlib.suppress(OSError):
            self.active.flush()
            self.active.write_indexes()
            self.producers.write_snapshot(self.directory, self.log_end_offset, sync=True)
            self._prune_snapshots()
        for segment in self.segments:
            segment.close()

    async def delete(self) -> Path | None:
        """Close the partition for good and move its directory aside (topic deletion).

        Waits for an append in progress. Returns the renamed directory for the caller to
        remove once the catalog no longer lists the topic (``*.deleted`` leftovers are removed
        on start).
        """
        async with self.lock:
            self.closed = self.deleted = True
            self.wake_waiters()
            for segment in self.segments:
                segment.close()
            target = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}.deleted")
            try:
                self.directory.rename(target)
            except FileNotFoundError:
                return None
            return target
