"""Sparse offset and time indexes of one segment, kept in memory and written as Kafka's files.

``<base>.index`` -- one 8-byte entry per ``index.interval.bytes`` of log:

======  ====  ===============  ==============================================================
offset  size  field            meaning
======  ====  ===============  ==============================================================
0       4     relativeOffset   u32: baseOffset of the indexed batch - the segment's base offset
4       4     position         u32: byte position of that batch in the ``.log``
======  ====  ===============  ==============================================================

``<base>.timeindex`` -- one 12-byte entry whenever the largest timestamp seen so far grows at an
index point, plus a final one when the segment is closed:

======  ====  ===============  ==============================================================
0       8     timestamp        i64: largest maxTimestamp of every batch up to this entry's batch
8       4     relativeOffset   u32: last offset of that batch - the segment's base offset
======  ====  ===============  ==============================================================

Both are big-endian and strictly increasing. They are derived data: the active segment's are
rebuilt from the log on every start, and a missing or inconsistent file is rebuilt from the log's
batch headers, so they are written whole when a segment is closed rather than on every append.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

OFFSET_ENTRY = struct.Struct(">II")
TIME_ENTRY = struct.Struct(">qI")


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half-written index
        raise
    os.replace(tmp, path)


class OffsetIndex:
    """Base offsets of indexed batches and their positions, for finding where to start reading."""

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        # Typed arrays: 16 bytes an entry instead of ~70 for lists of ints (a full 1 GiB segment
        # of small batches has a quarter of a million entries).
        self.offsets = array("q")
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before ``offset`` (0 if none)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def to_bytes(self) -> bytes:
        base = self.base_offset
        pack = OFFSET_ENTRY.pack
        pairs = zip(self.offsets, self.positions, strict=True)
        return b"".join(pack(o - base, p) for o, p in pairs)

    def write(self, path: Path) -> None:
        _write_atomically(path, self.to_bytes())

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        """The index in ``path``, or None if missing or inconsistent with the log's size."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) % OFFSET_ENTRY.size:
            return None
        index = cls(base_offset)
        last_offset = last_position = -1
        for relative, position in OFFSET_ENTRY.iter_unpack(data):
            if relative <= last_offset or position <= last_position or position >= log_size:
                return None
            index.append(base_offset + relative, position)
            last_offset, last_position = relative, position
        return index


class TimeIndex:
    """Running maximum timestamps at index points: where a timestamp search may start."""

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record ``(timestamp, offset)`` if it moves the maximum forward."""
        if timestamp > self.last_timestamp and (not self.offsets or offset > self.offsets[-1]):
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def lookup(self, timestamp: int) -> int:
        """An offset after which a timestamp search for ``timestamp`` must start (base - 1 if none).

        Every batch up to and including the returned offset has timestamps below ``timestamp``.
        """
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset - 1

    def to_bytes(self) -> bytes:
        base = self.base_offset
        pack = TIME_ENTRY.pack
        return b"".join(
            pack(t, o - base) for t, o in zip(self.timestamps, self.offsets, strict=True)
        )

    def write(self, path: Path) -> None:
        _write_atomically(path, self.to_bytes())

    @classmethod
    def load(cls, path: Path, base_offset: int, end_offset: int) -> TimeIndex | None:
        """The index in ``path``, or None when missing or inconsistent with ``end_offset``."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) % TIME_ENTRY.size:
            return None
        index = cls(base_offset)
        for timestamp, relative in TIME_ENTRY.iter_unpack(data):
            offset = base_offset + relative
            if offset >= end_offset or timestamp <= index.last_timestamp:
                return None
            if index.offsets and offset <= index.offsets[-1]:
                return None
            index.maybe_append(timestamp, offset)
        return index
