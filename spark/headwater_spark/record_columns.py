"""Decoding fetched RecordBatch v2 bytes into per-record columns, as fast as the executor allows.

The executors' read path decodes every record of every fetched batch, so its per-record cost is
the floor of the whole job. aiokafka ships a compiled (Cython) RecordBatch v2 reader that decodes
a record about fifteen times faster than the pure-Python shared codec (:mod:`headwater.records`);
it is used for uncompressed batches when importable (``pip install headwater[spark]`` brings it).
Compressed batches, and every batch when aiokafka is absent, go through :mod:`headwater.records`,
which stays the reference: ``tests/unit/test_spark_record_columns.py`` proves both give equal
columns. CRCs are verified before decoding, by the caller (``iter_batches(verify_crc=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.records.batch import BatchHeader, Buffer, decode_batch

try:
    from aiokafka.record.default_records import (  # type: ignore[import-untyped]
        DefaultRecordBatch as _CompiledBatch,
    )
except ImportError:  # pragma: no cover - exercised only where aiokafka is not installed
    _CompiledBatch = None

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08  # batch attributes bit 3: LogAppendTime
Headers = list[tuple[str, bytes | None]]


COMPILED = _CompiledBatch is not None
"""Whether aiokafka's compiled reader is importable (else the pure-Python codec is used)."""


@dataclass(slots=True)
class RecordColumns:
    """Records of one partition, column-wise: what the source turns into Arrow and the fused
    validation path reads directly. A lean read fills only ``offsets`` and ``values``."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[Headers] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)  # 0 CreateTime, 1 LogAppendTime

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self, count: int) -> RecordColumns:
        """Remove and return the first ``count`` records."""
        head = RecordColumns(
            self.offsets[:count],
            self.timestamps[:count],
            self.keys[:count],
            self.values[:count],
            self.headers[:count],
            self.timestamp_types[:count],
        )
        del self.offsets[:count], self.timestamps[:count], self.keys[:count]
        del self.values[:count], self.headers[:count], self.timestamp_types[:count]
        return head


def append_batch(
    out: RecordColumns,
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    low: int,
    high: int,
    *,
    lean: bool = False,
    compiled: bool = COMPILED,
) -> int:
    """Append the records of the batch at ``buf[pos:]`` with ``low <= offset < high`` to ``out``;
    returns how many were appended. ``lean`` fills only ``offsets`` and ``values``; ``compiled``
    False forces the reference codec (tests compare the two)."""
    before = len(out.offsets)
    if not lean:
        timestamp_type = 1 if header.attributes & _TIMESTAMP_TYPE_BIT else 0
    if compiled and _CompiledBatch is not None and not header.attributes & _CODEC_MASK:
        whole = header.base_offset >= low and header.last_offset < high
        _append_compiled(out, bytes(buf[pos : pos + header.size]), low, high, whole, lean)
    else:
        _append_reference(out, buf, pos, low, high, lean)
    added = len(out.offsets) - before
    if not lean:
        out.timestamp_types.extend([timestamp_type] * added)
    return added


def _append_compiled(
    out: RecordColumns, data: bytes, low: int, high: int, whole: bool, lean: bool
) -> None:
    # One pass, each record object dropped as soon as it is read: keeping them all alive (a
    # list of records) costs several times the decode itself in allocations.
    offsets, values = out.offsets.append, out.values.append
    if lean and whole:
        for r in _CompiledBatch(data):
            offsets(r.offset)
            values(r.value)
        return
    timestamps, keys, headers = out.timestamps.append, out.keys.append, out.headers.append
    for r in _CompiledBatch(data):
        offset = r.offset
        if whole or low <= offset < high:
            offsets(offset)
            values(r.value)
            if not lean:
                timestamps(r.timestamp)
                keys(r.key)
                headers(list(r.headers))


def _append_reference(
    out: RecordColumns, buf: Buffer, pos: int, low: int, high: int, lean: bool
) -> None:
    records = decode_batch(buf, pos)[1]
    if records and (records[0].offset < low or records[-1].offset >= high):
        # The first batch of a fetch may begin before the asked offset, the last end after it.
        records = [r for r in records if low <= r.offset < high]
    out.offsets.extend([r.offset for r in records])
    out.values.extend([r.value for r in records])
    if not lean:
        out.timestamps.extend([r.timestamp for r in records])
        out.keys.extend([r.key for r in records])
        out.headers.extend([r.headers for r in records])
