"""Fetched RecordBatch v2 bytes decoded column-wise into numpy arrays and Arrow columns.

The executors' read path decodes every record of every fetch, so its per-record cost is the
floor of every Spark read. Decoding record objects one by one (even with a compiled reader)
spends most of its time allocating them; here one fetch is decoded as a whole:

1. the records sections of the fetch's batches (decompressed where compressed) are joined into
   one buffer, one copy;
2. one Python step per record follows the record-length prefixes to find where each record
   starts (:func:`headwater.records.grammar.record_heads`, the only per-record Python);
3. every field (timestamp and offset deltas, key and value lengths, header count) is then read
   for all records at once with numpy, varints included
   (:func:`headwater_kernel.record_columns.record_columns`, shared with the broker's checks);
4. keys and values become Arrow binary arrays built from one data buffer and an offsets array
   (:meth:`FetchedRecords.arrow`), never Python ``bytes`` per record; the validation path, which
   needs ``bytes``, slices them from the joined buffer (:meth:`FetchedRecords.value_list`).

Headers, rare, are read per record in Python, and only for records that have some. A records
section whose walk is inconsistent (a length running past the batch, a record count that does not
match) is handed to the shared codec (:mod:`headwater.records`), the reference, which raises its
:class:`~headwater.errors.CorruptRecordError`; CRCs are verified before, by the caller.
``tests/unit/spark/test_arrow_records.py`` checks the columns equal the reference codec's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs

from headwater.errors import CorruptRecordError
from headwater.records.batch import BatchHeader, Buffer, decode_batch
from headwater.records.compression import decompress
from headwater.records.grammar import RecordHeaders, read_headers, record_heads
from headwater.records.header import CODEC_MASK, HEADER_SIZE, TIMESTAMP_TYPE_BIT
from headwater_kernel.record_columns import record_columns

Headers = RecordHeaders
Placed = tuple[int, BatchHeader]

_EMPTY_I64 = np.zeros(0, np.int64)
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@dataclass(slots=True)
class FetchedRecords:
    """Records of one fetch, column-wise: numpy arrays of positions into ``data``.

    ``key_lengths``/``value_lengths`` are -1 for null. A lean decode fills only ``offsets`` and
    the value columns (the others are empty). ``headers`` is None when no record has any.
    """

    data: bytes
    offsets: np.ndarray
    value_starts: np.ndarray
    value_lengths: np.ndarray
    timestamps: np.ndarray
    timestamp_types: np.ndarray
    key_starts: np.ndarray
    key_lengths: np.ndarray
    headers: list[Headers] | None

    def __len__(self) -> int:
        return len(self.offsets)

    def slice(self, start: int, stop: int) -> FetchedRecords:
        """Records ``[start, stop)`` (numpy views over the same buffer)."""
        # A lean decode's unfilled columns are empty: slicing leaves them empty.
        return FetchedRecords(
            self.data,
            self.offsets[start:stop],
            self.value_starts[start:stop],
            self.value_lengths[start:stop],
            self.timestamps[start:stop],
            self.timestamp_types[start:stop],
            self.key_starts[start:stop],
            self.key_lengths[start:stop],
            None if self.headers is None else self.headers[start:stop],
        )

    def value_list(self) -> list[bytes | None]:
        """The values as ``bytes`` (None for null), for code that needs Python objects."""
        return _bytes_list(self.data, self.value_starts, self.value_lengths)

    def key_list(self) -> list[bytes | None]:
        return _bytes_list(self.data, self.key_starts, self.key_lengths)

    def arrow(self, *, headers: bool = True) -> dict[str, pa.Array]:
        """The columns as Arrow arrays: offset (int64), timestamp (int64 ms), timestampType
        (int32), key and value (binary) and, with ``headers``, headers (list of key/value
        structs). Not for a lean decode."""
        n = len(self)
        columns = {
            "key": _binary_array(self.data, self.key_starts, self.key_lengths),
            "value": _binary_array(self.data, self.value_starts, self.value_lengths),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestamp": pa.array(self.timestamps, pa.int64()),
            "timestampType": pa.array(self.timestamp_types, pa.int32()),
        }
        if not headers:
            return columns
        if self.headers is None:
            empty = pa.array([], HEADER_TYPE.value_type)
            columns["headers"] = pa.ListArray.from_arrays(
                pa.array(np.zeros(n + 1, np.int32)), empty
            )
        else:
            columns["headers"] = pa.array(
                [[{"key": k, "value": v} for k, v in h] for h in self.headers], HEADER_TYPE
            )
        return columns


def _bytes_list(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> list[bytes | None]:
    ends = (starts + lengths).tolist()
    if not len(lengths) or int(lengths.min()) >= 0:
        return [data[s:e] for s, e in zip(starts.tolist(), ends, strict=True)]
    return [
        None if n < 0 else data[s:e]
        for s, e, n in zip(starts.tolist(), ends, lengths.tolist(), strict=True)
    ]


def _binary_array(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of ``data[start:start+length]`` (null where length < 0): one gather of
    the bytes into a contiguous buffer and an offsets array, no per-record Python."""
    n = len(starts)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    u = np.frombuffer(data, np.uint8)
    if total:
        index = np.repeat(starts - offsets[:-1], sizes)
        index += np.arange(total, dtype=np.int64)
        values = u[index]
    else:
        values = np.zeros(0, np.uint8)
    null_count = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(values)], null_count
    )


def _corrupt(buf: Buffer, placed: Sequence[Placed]) -> NoReturn:
    """Raise the reference codec's error for the first of ``placed`` it refuses."""
    for pos, _header in placed:
        decode_batch(buf, pos)
    raise CorruptRecordError(
        f"records of the batch at {placed[0][0]} do not decode (lengths do not add up)"
    )


def decode_fetch(
    buf: Buffer, placed: Sequence[Placed], low: int, high: int, *, lean: bool = False
) -> FetchedRecords:
    """The records of the batches ``placed`` (positions in ``buf`` and headers, CRC-checked by
    the caller, control batches left out) with ``low <= offset < high``, column-wise. ``lean``
    fills only offsets and values."""
    view = memoryview(buf)
    sections: list[Any] = []
    bounds: list[tuple[int, int, int]] = []  # (begin, end, records) of each section in data
    at = 0
    for pos, header in placed:
        section: Any = view[pos + HEADER_SIZE : pos + header.size]
        codec = header.attributes & CODEC_MASK
        if codec:
            section = decompress(codec, bytes(section))
        sections.append(section)
        bounds.append((at, at + len(section), header.records_count))
        at += len(section)
    data = b"".join(sections)
    heads: list[int] = []
    for (begin, end, count), placed_batch in zip(bounds, placed, strict=True):
        if not record_heads(data, begin, end, count, heads):
            _corrupt(buf, [placed_batch])
    batch = np.repeat(np.arange(len(placed)), np.array([b[2] for b in bounds], np.int64))
    columns = record_columns(np.frombuffer(data, np.uint8), np.array(heads, np.int64))
    if columns is None:
        _corrupt(buf, placed)
    bad = ~columns.well_framed()
    if bad.any():
        _corrupt(buf, [placed[int(batch[int(np.argmax(bad))])]])
    value_starts, value_lengths = columns.value_starts, columns.value_lengths
    offsets = np.array([h.base_offset for _, h in placed], np.int64)[batch] + columns.offset_deltas
    keep: Any = slice(None)
    if len(offsets) and (int(offsets[0]) < low or int(offsets[-1]) >= high):
        keep = (offsets >= low) & (offsets < high)
    if lean:
        return FetchedRecords(
            data,
            offsets[keep],
            value_starts[keep],
            value_lengths[keep],
            _EMPTY_I64,
            _EMPTY_I64,
            _EMPTY_I64,
            _EMPTY_I64,
            None,
        )
    log_append = np.array([bool(h.attributes & TIMESTAMP_TYPE_BIT) for _, h in placed], bool)[batch]
    base_ts = np.array([h.base_timestamp for _, h in placed], np.int64)[batch]
    max_ts = np.array([h.max_timestamp for _, h in placed], np.int64)[batch]
    timestamps = np.where(log_append, max_ts, base_ts + columns.timestamp_deltas)
    headers: list[Headers] | None = None
    headers_at, header_counts = columns.headers_at[keep], columns.header_counts[keep]
    if header_counts.any():
        starts_kept, counts_kept = headers_at.tolist(), header_counts.tolist()
        headers = [
            read_headers(data, s, c) if c else []
            for s, c in zip(starts_kept, counts_kept, strict=True)
        ]
    return FetchedRecords(
        data,
        offsets[keep],
        value_starts[keep],
        value_lengths[keep],
        timestamps[keep],
        log_append[keep].astype(np.int32),
        columns.key_starts[keep],
        columns.key_lengths[keep],
        headers,
    )
