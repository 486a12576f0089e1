"""One log segment: a ``.log`` file of record batches and its sparse offset and time indexes.

On-disk layout of a partition directory ``<data_dir>/<topic>-<partition>/``::

    00000000000000000000.log         record batches, byte-for-byte as producers sent them
    00000000000000000000.index       sparse offset index (see index.py)
    00000000000000000000.timeindex   sparse time index (see index.py)
    00000000000000004711.log         next segment: named by the base offset of its first batch
    ...
    00000000000000004711.snapshot    idempotent-producer state as of offset 4711 (producer_state.py)
    log-start-offset                 checkpoint: the first offset still readable (decimal text)

A ``.log`` is nothing but concatenated Kafka RecordBatch v2 batches (layout in
``headwater/records/batch.py``). The broker changes only ``baseOffset`` (outside the CRC) when it
appends a batch -- and, for ``LogAppendTime`` topics, the attributes' timestamp-type bit and
``maxTimestamp``, re-sealing the CRC -- so a fetch returns stored bytes unchanged and any
RecordBatch v2 decoder can read them. File names are the 20-digit zero-padded base offset, as
Kafka's, so a sorted listing is offset order. Only the last (active) segment is written; older
ones are immutable until retention deletes them whole.

Crash recovery cuts the active segment at the end of its last whole, CRC-valid batch (a torn or
garbage tail from a crash is logged and truncated) and rebuilds its indexes from the batch
headers, as ZODB's FileStorage cuts a damaged tail on open. A closed segment's last batches
(from its last index entry) are checked on open too: one that does not end whole at the next
segment's base is recovered the same way, and the newer segments are dropped.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from headwater.errors import StorageError
from headwater.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    ValidPrefix,
    parse_header,
    valid_prefix,
)
from headwater_broker.log.index import OffsetIndex, TimeIndex

log = logging.getLogger("headwater.broker.segment")

_SCAN_CHUNK = 64 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class WrittenBatch(NamedTuple):
    """One batch of a :meth:`Segment.append`: where it sits in the written bytes, what it holds.

    A NamedTuple, not a dataclass: one is built per appended batch on the produce hot path.
    """

    position: int  # from the start of the concatenated chunks, not of the file
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class Segment:
    """A segment's files and what is known about them: size, next offset, largest timestamp.

    ``append`` writes batches whose base offsets are already assigned; reads go through
    ``os.pread`` on the same descriptor, so a fetch copies stored bytes without decoding them.
    """

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log"
        self.index_path = directory / f"{name}.index"
        self.time_index_path = directory / f"{name}.timeindex"
        self.index = OffsetIndex(base_offset)
        self.time_index = TimeIndex(base_offset)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.created_ms = int(time.time() * 1000)  # when the first batch was appended
        self.first_batch_ms = -1
        self._since_index = 0
        self._fd = -1
        self.dirty = False
        # Held across an fdatasync: see flush.
        self._flushing = threading.Lock()

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int) -> Segment:
        segment = cls(directory, base_offset)
        segment._fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        return segment

    @classmethod
    def open_closed(
        cls, directory: Path, base_offset: int, next_offset: int, interval: int
    ) -> Segment | None:
        """An older segment: trust its indexes if consistent, else rebuild them from the log.

        None when the segment is not whole: its last batches, from the last index entry on, are
        not all whole and CRC-valid or do not end at ``next_offset`` (the next segment's base).
        Every roll syncs the segment it closes, so only a damaged disk or a directory copied
        part-way leaves one so; the caller then recovers it as the active segment and drops the
        newer ones, so the log stays a prefix of what was written rather than serving a hole or
        bytes no decoder accepts.
        """
        segment = cls(directory, base_offset)
        segment._fd = os.open(segment.log_path, os.O_RDWR)
        segment.size = os.fstat(segment._fd).st_size
        segment.next_offset = next_offset
        index = OffsetIndex.load(segment.index_path, base_offset, segment.size)
        time_index = TimeIndex.load(segment.time_index_path, base_offset, next_offset)
        if index is None or time_index is None:
            log.warning("rebuilding indexes of %s", segment.log_path)
            valid, found = segment._valid_prefix(0)
            if valid != segment.size or not segment._ends_at(next_offset, found):
                segment.close()
                return None
            segment._rebuild_indexes(found, interval)
            segment.write_indexes()
        else:
            segment.index, segment.time_index = index, time_index
            segment.max_timestamp = time_index.last_timestamp
            position = index.lookup(next_offset - 1)
            valid, found = segment._valid_prefix(position)
            if position + valid != segment.size or not segment._ends_at(next_offset, found):
                segment.close()
                return None
        if segment.max_timestamp < 0:
            segment.max_timestamp = -1
        segment.created_ms = int(os.fstat(segment._fd).st_mtime * 1000)
        return segment

    def _valid_prefix(self, position: int) -> ValidPrefix:
        """The whole, CRC-valid batches from ``position`` to the end of the file (positions
        relative to ``position``)."""
        length = self.size - position
        if length <= 0:
            return ValidPrefix(0, [])
        # Map rather than read: a segment may be up to segment.bytes (1 GiB) long.
        with mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)[position:]
            try:
                return valid_prefix(view)
            finally:
                view.release()

    def _ends_at(self, next_offset: int, found: list[tuple[int, BatchHeader]]) -> bool:
        if not found:
            return self.size == 0 and next_offset == self.base_offset
        return found[-1][1].last_offset + 1 == next_offset

    @classmethod
    def recover_active(
        cls, directory: Path, base_offset: int, interval: int
    ) -> tuple[Segment, list[BatchHeader]]:
        """The last segment after a possible crash: cut any invalid tail, rebuild its indexes.

        Returns the segment and the headers of its batches (to rebuild producer state).
        """
        segment = cls(directory, base_offset)
        segment._fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        size = segment.size = os.fstat(segment._fd).st_size
        valid, found = segment._valid_prefix(0)
        if valid < size:
            log.warning(
                "truncating %s from %d to %d bytes: cut %d bytes of torn or invalid data",
                segment.log_path,
                size,
                valid,
                size - valid,
                extra={"cut_bytes": size - valid},
            )
            os.ftruncate(segment._fd, valid)
            os.fsync(segment._fd)
        segment.size = valid
        headers = [header for _pos, header in found]
        segment._rebuild_indexes(found, interval)
        if segment.first_batch_ms >= 0:
            # The append time of the first batch is not stored; its timestamp stands in for it.
            segment.created_ms = segment.first_batch_ms
        for path in (segment.index_path, segment.time_index_path):
            path.unlink(missing_ok=True)
        return segment, headers

    def _rebuild_indexes(self, batches: list[tuple[int, BatchHeader]], interval: int) -> None:
        self.index = OffsetIndex(self.base_offset)
        self.time_index = TimeIndex(self.base_offset)
        self._since_index = 0
        self.max_timestamp = -1
        self.first_batch_ms = -1
        self.next_offset = self.base_offset
        for pos, header in batches:
            self._note(pos, header.base_offset, header.last_offset, header.max_timestamp, interval)
            self._since_index += header.size
        if batches:
            self.size = batches[-1][0] + batches[-1][1].size

    # --- writing -----------------------------------------------------------------------------

    def _note(
        self, position: int, base_offset: int, last_offset: int, max_timestamp: int, interval: int
    ) -> None:
        """Account one batch at ``position``: index it when due, advance next offset and time."""
        if self._since_index > interval:
            self.index.append(base_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.next_offset - 1)
            self._since_index = 0
        if self.first_batch_ms < 0:
            self.first_batch_ms = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
        self.next_offset = last_offset + 1

    def append(self, chunks: list[memoryview], batches: list[WrittenBatch], interval: int) -> None:
        """Write ``chunks`` at the end and account ``batches``, the batches they hold.

        A failed write is cut back so the file never ends mid-batch.
        """
        start = self.size
        total = sum(len(c) for c in chunks)
        try:
            written = os.pwritev(self._fd, chunks, start)
            while written < total:  # short writes are rare (signals, full disk); finish them
                rest = b"".join(bytes(c) for c in chunks)[written:]
                n = os.pwrite(self._fd, rest, start + written)
                if n <= 0:
                    raise OSError("short write")
                written += n
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise StorageError(f"writing {self.log_path}: {exc}") from exc
        for batch in batches:
            self._note(
                start + batch.position,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
                interval,
            )
            self._since_index += batch.size
        self.size = start + total
        self.dirty = True

    def flush(self) -> None:
        """Make every byte appended before this call durable (fdatasync).

        Callable from several threads at once (a group-commit sync in a worker thread, a roll on
        the event loop): a call made while another's fdatasync is in flight waits for it and then
        syncs what that one may not cover. Without the wait, the second caller would see
        ``dirty`` already cleared and return at once, before the bytes were durable -- a roll
        would then make the next segment and the producer snapshot durable over a closed
        segment whose tail a power loss can still take.
        """
        with self._flushing:
            if self.dirty and self._fd >= 0:
                # Cleared first: bytes appended while fdatasync runs set it again.
                self.dirty = False
                try:
                    os.fdatasync(self._fd)
                except OSError:
                    self.dirty = True
                    raise

    def truncate(self, position: int, interval: int) -> None:
        """Cut the file at ``position`` (a batch boundary), durably, and rebuild the indexes.

        The segment is the active one afterwards: its index files, now stale, are removed (an
        active segment's indexes live in memory and are rebuilt from the log on start).
        """
        os.ftruncate(self._fd, position)
        os.fsync(self._fd)
        self.size = position
        self.dirty = False
        self._rebuild_indexes(list(self.headers()), interval)
        self.size = position
        for path in (self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        if self.first_batch_ms >= 0:
            self.created_ms = self.first_batch_ms

    def write_indexes(self) -> None:
        """Persist both indexes; a closing segment also records its largest timestamp."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.next_offset - 1)
        self.index.write(self.index_path)
        self.time_index.write(self.time_index_path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)

    # --- reading -----------------------------------------------------------------------------

    def is_index_full(self, max_index_bytes: int) -> bool:
        return (len(self.index) + 1) * 8 > max_index_bytes

    def read(self, position: int, size: int) -> bytes:
        if self._fd < 0:
            raise StorageError(f"segment {self.log_path} is closed")
        return os.pread(self._fd, size, position)

    def headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each stored batch from ``position`` on, read in chunks."""
        end = self.size
        while position < end:
            chunk = self.read(position, min(_SCAN_CHUNK, end - position))
            pos = 0
            while pos + HEADER_SIZE <= len(chunk):
                header = parse_header(chunk, pos)
                yield position + pos, header
                pos += header.size
            if pos == 0:  # a header straddles the chunk end; read it on its own
                header = parse_header(self.read(position, HEADER_SIZE))
                yield position, header
                pos = header.size
            position += pos

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The stored batch containing ``offset`` (or the first after it), with its position."""
        for position, header in self.headers(self.index.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None
