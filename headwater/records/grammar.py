"""The record grammar of Kafka's records section, read in one place.

A RecordBatch v2's records section (after the 61-byte header, decompressed) is ``recordsCount``
records, each (varint and varlong are zig-zag base-128, ``varint.py``)::

    field            type     meaning
    length           varint   bytes of the record after this field
    attributes       int8     unused, 0
    timestampDelta   varlong  timestamp - baseTimestamp
    offsetDelta      varint   offset - baseOffset: the record's index in the batch
    keyLength        varint   -1 for a null key
    key              bytes
    valueLength      varint   -1 for a null value
    value            bytes
    headerCount      varint
    headers          (headerKeyLength varint, headerKey utf-8, headerValueLength varint
                     (-1 = null), headerValue bytes) * headerCount

Everything that reads record fields one by one reads them here: :func:`read_records` decodes
a section into records (the SDK, the CLI, replication checks), :func:`check_records` proves a
section well formed before a broker appends it (``headwater_broker.validation``), and
:func:`record_heads` and :func:`read_headers` serve the column-wise readers, which read the
same fields for all records at once with numpy (``headwater_kernel.record_columns``, outside
this numpy-free package). The encoders (``encoder.py``, ``plain.py``) write this layout.

The two walks are written for speed rather than brevity: one- and two-byte varints (every
field of records under 8 KiB) are read inline, longer ones by
:func:`~headwater.records.varint.read_varint`. Calling a function per field decodes 15-20%
slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from headwater.errors import CorruptRecordError
from headwater.records.header import TIMESTAMP_TYPE_BIT, BatchHeader
from headwater.records.varint import VarintTooLongError, read_varint

T = TypeVar("T")

RecordHeaders = list[tuple[str, bytes | None]]

RecordFactory = Callable[[int, int, bytes | None, bytes | None, RecordHeaders], T]
"""Builds a caller's record from ``(offset, timestamp, key, value, headers)``."""

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def read_records(data: bytes, header: BatchHeader, pos: int, factory: RecordFactory[T]) -> list[T]:
    """Every record of the records section ``data`` of the batch at ``pos``, in order, each
    built by ``factory``.

    One loop reads the whole section: each turn reads one varint, then acts on the field it
    is; ``field`` numbers them in the order a record has them: 0 length, 1 timestampDelta,
    2 offsetDelta, 3 key length, 4 value length, 5 header count, then 6 header key length and
    7 header value length per header. The numbers are literals, not named constants: a global
    lookup per field is measurable here. A null key (01) and no headers (00), the common cases,
    are recognized by their one byte without a turn of their own.
    """
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    records: list[T] = []
    append = records.append
    n = len(data)
    i = 0
    left = header.records_count
    field = 0
    length = record_end = ts_delta = offset_delta = headers_left = 0
    key: bytes | None = None
    value: bytes | None = None
    name = ""
    headers: RecordHeaders = []
    if left > 0:
        try:
            while True:  # a turn per varint, until the last record is complete
                b = data[i]
                if b < 0x80:
                    v = (b >> 1) ^ -(b & 1)
                    i += 1
                else:
                    c = data[i + 1]
                    if c < 0x80:
                        z = (b & 0x7F) | (c << 7)
                        v = (z >> 1) ^ -(z & 1)
                        i += 2
                    else:
                        v, i = read_varint(data, i)
                if field < 3:
                    if field == 0:  # length
                        length = v
                        record_end = i + length
                        if length < 0 or record_end > n:
                            raise CorruptRecordError(
                                f"record {len(records)} of batch at {pos} overruns the batch"
                            )
                        i += 1  # the attributes byte (unused)
                        field = 1
                    elif field == 1:  # timestampDelta
                        ts_delta = v
                        field = 2
                    else:  # offsetDelta
                        offset_delta = v
                        if data[i] == 1:  # a null key
                            key = None
                            i += 1
                            field = 4
                        else:
                            field = 3
                    continue
                if field == 3:  # key length
                    if v < 0:
                        raise CorruptRecordError(f"key length {v} in batch at {pos}")
                    key = data[i : i + v]
                    i += v
                    field = 4
                    continue
                if field == 4:  # value length
                    if v < 0:
                        value = None
                    else:
                        value = data[i : i + v]
                        i += v
                    if data[i] == 0:  # no headers: the record ends here
                        i += 1
                        headers = []
                    else:
                        field = 5
                        continue
                elif field == 5:  # header count
                    headers = []
                    if v > 0:  # a negative count reads as none
                        headers_left = v
                        field = 6
                        continue
                elif field == 6:  # header key length
                    if v < 0:
                        raise CorruptRecordError(f"null header key in batch at {pos}")
                    name = data[i : i + v].decode("utf-8", "replace")
                    i += v
                    field = 7
                    continue
                else:  # header value length
                    if v < 0:
                        headers.append((name, None))
                    else:
                        headers.append((name, data[i : i + v]))
                        i += v
                    headers_left -= 1
                    if headers_left:
                        field = 6
                        continue
                # The record's last field was read.
                if i != record_end:
                    raise CorruptRecordError(
                        f"record {len(records)} of batch at {pos}: length {length} does not "
                        "match its fields"
                    )
                append(
                    factory(
                        base_offset + offset_delta,
                        base_ts + ts_delta if log_append is None else log_append,
                        key,
                        value,
                        headers,
                    )
                )
                left -= 1
                if not left:
                    break
                field = 0
        except IndexError:
            raise CorruptRecordError(f"records of batch at {pos} end early") from None
    if i != n:
        raise CorruptRecordError(f"{n - i} bytes after the last record of batch at {pos}")
    return records


def check_records(data: bytes, count: int, base_timestamp: int, pos: int) -> None:
    """Walk the records section ``data`` of the batch at ``pos``; raise on the first fault.

    Written for speed, as :func:`read_records`: one- and two-byte varints (every
    field of records under 8 KiB) are read inline, longer ones by :func:`read_varint`; field
    reads are unrolled rather than looped over. Bounds are checked where a length is used, and an
    index past the section raises IndexError, which reports the batch as ending early.
    """
    n = len(data)
    # timestampDelta bounds keeping baseTimestamp + delta an int64.
    ts_low = _INT64_MIN - base_timestamp
    ts_high = _INT64_MAX - base_timestamp
    i = 0
    index = 0
    try:
        while index < count:
            b = data[i]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:
                length = (b & 0x7F) | (data[i + 1] << 7)
                length = (length >> 1) ^ -(length & 1)
                i += 2
            else:
                length, i = read_varint(data, i)
            end = i + length
            if length < 6 or end > n:  # attributes and five one-byte varints at the least
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos} has length {length}; "
                    f"{n - i} bytes remain in the batch"
                )
            b = data[i + 1]  # after the attributes byte
            if b < 0x80:
                v = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                v, i = read_varint(data, i + 1)
            if not ts_low <= v <= ts_high:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos}: timestamp delta {v} "
                    "leaves int64"
                )
            b = data[i]
            if b < 0x80:
                v = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:
                v = (b & 0x7F) | (data[i + 1] << 7)
                v = (v >> 1) ^ -(v & 1)
                i += 2
            else:
                v, i = read_varint(data, i)
            if v != index:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos} has offset delta {v}"
                )
            b = data[i]  # key length
            if b < 0x80:
                v = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:
                v = (b & 0x7F) | (data[i + 1] << 7)
                v = (v >> 1) ^ -(v & 1)
                i += 2
            else:
                v, i = read_varint(data, i)
            if v > 0:
                i += v
            elif v < -1:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos}: key length {v}"
                )
            b = data[i]  # value length
            if b < 0x80:
                v = (b >> 1) ^ -(b & 1)
                i += 1
            elif data[i + 1] < 0x80:
                v = (b & 0x7F) | (data[i + 1] << 7)
                v = (v >> 1) ^ -(v & 1)
                i += 2
            else:
                v, i = read_varint(data, i)
            if v > 0:
                i += v
            elif v < -1:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos}: value length {v}"
                )
            if i >= end:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos}: key and value overrun "
                    "the record"
                )
            b = data[i]  # header count
            if b == 0:
                i += 1
            elif b == 2:  # one header, the common case after none: read here, not in a call
                b = data[i + 1]  # its key length
                if b < 0x80 and not b & 1 and i + 2 + (b >> 1) < end:
                    i += 2 + (b >> 1)
                    b = data[i]  # its value length
                    if b < 0x80:
                        v = (b >> 1) ^ -(b & 1)
                        i += 1 + v if v > 0 else 1
                        if v < -1 or i > end:
                            raise CorruptRecordError(
                                f"record {index} of the batch at position {pos}: header value "
                                f"length {v} overruns the record"
                            )
                    else:
                        i = _walk_one_header_value(data, i, end, index, pos)
                else:
                    i = _walk_some_headers(data, i, end, index, pos)
            else:
                i = _walk_some_headers(data, i, end, index, pos)
            if i != end:
                raise CorruptRecordError(
                    f"record {index} of the batch at position {pos}: length {length} does not "
                    f"match its fields ({length + i - end} bytes)"
                )
            index += 1
    except IndexError:
        raise CorruptRecordError(
            f"batch at position {pos} declares {count} records; its records end after {index}"
        ) from None
    except VarintTooLongError as exc:
        raise CorruptRecordError(f"record {index} of the batch at position {pos}: {exc}") from None
    if i != n:
        raise CorruptRecordError(
            f"batch at position {pos} has {n - i} bytes after its {count} declared records"
        )


def _walk_some_headers(data: bytes, i: int, end: int, index: int, pos: int) -> int:
    try:
        return _walk_headers(data, i, end)
    except _HeaderError as fault:
        raise CorruptRecordError(
            f"record {index} of the batch at position {pos}: {fault}"
        ) from None


def _walk_one_header_value(data: bytes, i: int, end: int, index: int, pos: int) -> int:
    size, i = read_varint(data, i)
    if size < -1 or i + size > end:
        raise CorruptRecordError(
            f"record {index} of the batch at position {pos}: header value length {size} "
            "overruns the record"
        )
    return i + size if size > 0 else i


class _HeaderError(Exception):
    """A header that does not frame; :func:`_walk` says which record it is in."""


def _walk_headers(data: bytes, i: int, end: int) -> int:
    """Walk the header count and headers at ``data[i]`` of a record ending at ``end``; return
    the position after them."""
    headers, i = read_varint(data, i)
    if headers < 0 or headers > (end - i) // 2:  # each header takes two bytes at the least
        raise _HeaderError(f"{headers} headers do not fit the record")
    for _ in range(headers):
        b = data[i]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            i += 1
        else:
            size, i = read_varint(data, i)
        if size < 0 or i + size > end:
            raise _HeaderError(f"header key length {size} is null or overruns the record")
        i += size
        b = data[i]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            i += 1
        else:
            size, i = read_varint(data, i)
        if size < -1 or i + size > end:
            raise _HeaderError(f"header value length {size} overruns the record")
        if size > 0:
            i += size
    return i


def record_heads(data: bytes, begin: int, end: int, count: int, heads: list[int]) -> bool:
    """Append where each of ``count`` records in ``data[begin:end]`` starts (its length varint)
    to ``heads``; False when the lengths do not frame exactly that span or one is negative.

    Only the length varints are read, hopping from record to record: the one per-record step of
    the column-wise readers, which then read every other field for all records at once.
    """
    append = heads.append
    i = begin
    try:
        for _ in range(count):
            append(i)
            b = data[i]
            if b < 0x80:
                if b & 1:  # a negative length
                    return False
                i += 1 + (b >> 1)
            else:
                c = data[i + 1]
                if c < 0x80:
                    if b & 1:
                        return False
                    i += 2 + ((b & 0x7F) >> 1 | c << 6)
                else:
                    length, i = read_varint(data, i)
                    if length < 0:
                        return False
                    i += length
            if i > end:
                return False
    except (IndexError, CorruptRecordError):
        return False
    return i == end


def read_headers(data: bytes, i: int, count: int) -> RecordHeaders:
    """The ``count`` headers of a record starting at ``data[i]`` (after its header count)."""
    headers: RecordHeaders = []
    for _ in range(count):
        size, i = read_varint(data, i)
        if size < 0:
            raise CorruptRecordError("a record header has a null key")
        name = data[i : i + size].decode("utf-8", "replace")
        i += size
        size, i = read_varint(data, i)
        headers.append((name, None if size < 0 else data[i : i + size]))
        i += max(size, 0)
    return headers
