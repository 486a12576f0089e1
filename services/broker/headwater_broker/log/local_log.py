"""One replica's local log: its ordered segments on disk, their recovery, reads, cuts and retention.

The bytes layer under :class:`~headwater_broker.log.partition.PartitionLog` (as Kafka splits
``LocalLog`` from ``UnifiedLog``): it knows segments, indexes, the log start offset checkpoint
and the directory, not high watermarks, leader epochs or producers. Offsets only grow: the active
(last) segment is never deleted -- when retention expires everything, a new empty active segment
is rolled at the log end offset first -- and its file name carries that offset across restarts.
The log start offset (first readable offset) is checkpointed in ``log-start-offset``. Layout of
the directory: see segment.py.

Failed writes (a full or broken disk) are ``StorageError`` caused by the ``OSError``
(``is_disk_failure``), whichever operation found them.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from headwater.errors import StorageError
from headwater.records.batch import HEADER_SIZE, BatchHeader, decode_batch, parse_header
from headwater.types import Offset, PartitionId, TimestampMs
from headwater_broker.log.offset_file import read_offset, write_offset
from headwater_broker.log.segment import Segment, WrittenBatch
from headwater_broker.topic_config import TopicConfig

log = logging.getLogger("headwater.broker.partition")

LOG_START_FILE = "log-start-offset"

FsyncPolicy = Literal["always", "interval", "never"]
"""When appended bytes are fdatasynced: before the append is answered (and readable), every
``BROKER_FSYNC_INTERVAL_MS`` in the background, or only when a segment rolls or closes."""


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole stored batches read from a partition, and the partition's bounds at that moment."""

    data: bytes
    records: int  # records in the returned batches (some may precede the asked offset)
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


def partition_dir_name(topic: str, partition: int) -> str:
    """A replica's directory under the data directory: ``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def fsync_directory(path: Path) -> None:
    """Make file creations, renames and deletions in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_disk_failure(error: BaseException) -> bool:
    """Whether ``error`` is a write to the data directory that failed (a full or broken disk:
    a StorageError caused by an OSError), rather than, say, a log closed under a request."""
    return isinstance(error, StorageError) and isinstance(error.__cause__, OSError)


class LocalLog:
    """The segments of one partition replica (``open`` recovers them from a crash)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        *,
        sync: bool = True,
    ) -> None:
        self.directory = directory
        self.sync = sync  # fsync the directory and rolled segments (BROKER_FSYNC != never)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = Offset(0)
        self.on_roll: Callable[[Offset], None] = lambda _end: None
        """Called while a segment rolls, after the old one is synced and before the new one
        exists (the partition writes its producer snapshot at the log end there)."""

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        *,
        sync: bool = True,
    ) -> tuple[LocalLog, list[BatchHeader]]:
        """Open (creating if needed) a partition directory, recovering its segments from any
        crash; also return the active segment's batch headers (for the state above)."""
        local = cls(directory, topic, partition, config, sync=sync)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):
            stale.unlink(missing_ok=True)
        checkpoint = local._read_log_start()
        bases = sorted(
            int(p.name[:20])
            for p in directory.glob("*.log")
            if len(p.name) == 24 and p.name[:20].isdigit()
        )
        if not bases:
            bases = [checkpoint]
        for i, (base, next_base) in enumerate(itertools.pairwise(bases)):
            closed = Segment.open_closed(directory, base, next_base, config.index_interval_bytes)
            if closed is None:
                local._drop_segments_after(bases[i:])
                bases = bases[: i + 1]
                break
            local.segments.append(closed)
        # A new first segment's name is made durable by the leader-epoch checkpoint's first
        # write (rename, then fsync of this directory), which precedes the first append.
        active, active_headers = Segment.recover_active(
            directory, bases[-1], config.index_interval_bytes
        )
        local.segments.append(active)
        local._bases = [s.base_offset for s in local.segments]
        local.log_start_offset = Offset(
            min(max(checkpoint, local.segments[0].base_offset), local.log_end_offset)
        )
        return local, active_headers

    def _drop_segments_after(self, bases: list[int]) -> None:
        """Delete the segments newer than ``bases[0]``, whose segment lost its tail: the log is
        cut where the tail was lost (the first segment is recovered as the active one)."""
        for base in reversed(bases[1:]):  # newest first: a crash part-way leaves a prefix
            Segment(self.directory, base).delete()
        fsync_directory(self.directory)
        log.warning(
            "%s-%d: segment %d lost its tail; recovering it as the active segment and "
            "dropping the %d newer segments from offset %d on",
            self.topic,
            self.partition,
            bases[0],
            len(bases) - 1,
            bases[1],
            extra={"dropped_segments": len(bases) - 1},
        )

    def _read_log_start(self) -> int:
        return read_offset(self.directory / LOG_START_FILE)

    def write_log_start(self) -> None:
        write_offset(self.directory / LOG_START_FILE, self.log_start_offset, sync=True)
        fsync_directory(self.directory)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> Offset:
        """The next offset to assign: every batch below it is written (maybe not yet synced)."""
        return Offset(self.segments[-1].next_offset)

    def headers(self, start: int = 0, *, closed_only: bool = False) -> Iterator[BatchHeader]:
        """The batch headers of every segment from the one holding ``start`` on, in order."""
        segments = self.segments[:-1] if closed_only else self.segments
        for segment in segments:
            if segment.next_offset > start:
                yield from (h for _pos, h in segment.headers() if h.base_offset >= start)

    # --- writing -----------------------------------------------------------------------------

    def roll_if_old(self, now_ms: int) -> None:
        """Roll on ``segment.ms`` (counted from a segment's first append)."""
        if self.active.size and now_ms - self.active.created_ms > self.config.segment_ms:
            self.roll(now_ms)
        if not self.active.size:
            self.active.created_ms = now_ms

    def is_full_for(self, pending_bytes: int, size: int) -> bool:
        """Whether the active segment must roll before ``size`` more bytes after
        ``pending_bytes`` not yet written (never for an empty segment: a batch fits whole)."""
        segment, config = self.active, self.config
        return bool(segment.size or pending_bytes) and (
            segment.size + pending_bytes + size > config.segment_bytes
            or segment.is_index_full(config.segment_index_bytes)
        )

    def write(self, chunks: list[memoryview], batches: list[WrittenBatch]) -> None:
        """Write one run of batches into the active segment (one ``pwritev``)."""
        self.active.append(chunks, batches, self.config.index_interval_bytes)

    def roll(self, now_ms: int) -> None:
        """Close the active segment and start a new one at the log end offset.

        A failed write (a full disk) is a ``StorageError`` (50003), never a bare ``OSError``
        answered as an internal error; the active segment stays as it was.
        """
        old = self.active
        try:
            old.flush()
            old.write_indexes()
            self.on_roll(self.log_end_offset)
            segment = Segment.create(self.directory, self.log_end_offset)
        except OSError as exc:
            raise StorageError(
                f"rolling a segment of {self.topic}-{self.partition}: {exc}"
            ) from exc
        segment.created_ms = now_ms
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        if self.sync:
            fsync_directory(self.directory)

    def flush(self) -> None:
        """fdatasync the active segment (closed segments were synced on roll)."""
        segment = self.active
        try:
            segment.flush()
        except OSError as exc:
            raise StorageError(f"fsync of {segment.log_path}: {exc}") from exc

    # --- reading -----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, below: int) -> tuple[bytes, int, Offset]:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (at least one
        whole batch) and starting below ``below``; the bytes, their records and the next offset.
        """
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
                if header.base_offset >= below:
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
            return (data if pos == len(data) else data[:pos]), records, Offset(next_offset)
        return b"", 0, Offset(offset)

    def lookup_timestamp(self, timestamp: int, below: int) -> tuple[Offset, TimestampMs] | None:
        """The earliest offset below ``below`` whose record timestamp is >= ``timestamp``."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp or segment.base_offset >= below:
                continue
            after = segment.time_index.lookup(timestamp)
            start = max(after + 1, segment.base_offset)
            found = segment.find(start)
            if found is None:
                continue
            for position, header in segment.headers(found[0]):
                if header.base_offset >= below:
                    return None
                if header.max_timestamp < timestamp:
                    continue
                _h, records = decode_batch(segment.read(position, header.size))
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return Offset(record.offset), TimestampMs(record.timestamp)
        return None

    # --- cutting -----------------------------------------------------------------------------

    def expired(self, now_ms: int) -> int:
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

    def delete_oldest(self, count: int, now_ms: int) -> None:
        """Delete the ``count`` oldest segments and move the log start past them (retention)."""
        if count >= len(self.segments):
            self.roll(now_ms)  # never delete the active segment: keep the log end offset
        doomed, self.segments = self.segments[:count], self.segments[count:]
        self._bases = self._bases[count:]
        self.log_start_offset = Offset(max(self.log_start_offset, self.segments[0].base_offset))
        self.write_log_start()
        for segment in doomed:
            segment.delete()

    def truncate(self, offset: int) -> Offset:
        """Cut whole batches from the one holding ``offset`` on; return the new log end."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        # Newest first: a crash part-way leaves a shorter but gapless log.
        for segment in reversed(self.segments[i + 1 :]):
            segment.delete()
        keep = self.segments[i]
        found = keep.find(offset)
        if found is not None:
            keep.truncate(found[0], self.config.index_interval_bytes)
        self.segments = self.segments[: i + 1]
        self._bases = self._bases[: i + 1]
        fsync_directory(self.directory)
        return self.log_end_offset

    def restart_at(self, offset: int) -> None:
        """Delete every segment and start again, empty, at ``offset``."""
        for segment in reversed(self.segments):
            segment.delete()
        segment = Segment.create(self.directory, offset)
        self.segments = [segment]
        self._bases = [offset]
        self.log_start_offset = Offset(offset)
        self.write_log_start()

    # --- closing -----------------------------------------------------------------------------

    def close(self, on_close: Callable[[], None]) -> None:
        """Persist the active segment and its indexes, run ``on_close`` (the state above writes
        its snapshot), close the files. Best effort: a clean shutdown on a failed disk."""
        with contextlib.suppress(OSError):
            self.active.flush()
            self.active.write_indexes()
            on_close()
        for segment in self.segments:
            segment.close()

    def move_aside(self) -> Path | None:
        """Close the files and rename the directory ``<name>.<uuid>.deleted`` (None if gone)."""
        for segment in self.segments:
            segment.close()
        target = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}.deleted")
        try:
            self.directory.rename(target)
        except FileNotFoundError:
            return None
        return target


class GroupCommit:
    """fdatasync of a local log's active segment, one at a time (``BROKER_FSYNC=always``):
    appends written while one runs wait for, and share, the next. ``on_synced(end)`` is told
    the log end each sync covered. A failed sync is a StorageError caused by the OSError; what
    it covered is neither acknowledged nor visible, and a later sync covers it."""

    def __init__(self, local: LocalLog, on_synced: Callable[[Offset], None]) -> None:
        self.local = local
        self.on_synced = on_synced
        self._task: asyncio.Task[None] | None = None

    async def until(self, offset: int, synced_end: Callable[[], int]) -> None:
        """Return once ``synced_end()`` (what the syncs so far covered) reaches ``offset``."""
        while synced_end() < offset:
            if self._task is None:
                self._task = asyncio.create_task(self._sync())
            await asyncio.shield(self._task)

    async def idle(self) -> None:
        """Wait for a sync in flight (it uses the active segment's descriptor)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)

    async def _sync(self) -> None:
        segment, end = self.local.active, self.local.log_end_offset
        try:
            await asyncio.to_thread(segment.flush)
        except OSError as exc:
            raise StorageError(f"fsync of {segment.log_path}: {exc}") from exc
        finally:
            self._task = None
        self.on_synced(end)
