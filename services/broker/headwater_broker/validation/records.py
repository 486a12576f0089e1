"""Checking every record of a batch before a broker appends it, as Kafka's log validator does.

The CRC proves only that the bytes arrived as the producer sent them, not that a reader can
decode them: a batch of plain records flagged gzip, gzip of garbage or a record claiming 2^40
bytes all carry valid CRCs. :func:`validate_records` decompresses the records section and walks
it, so whatever it accepts ``headwater.records.decoder`` reads back. Checked per record (layout
in ``headwater.records.encoder``): its length frames exactly its fields, ``offsetDelta`` is its
index in the batch,
``baseTimestamp + timestampDelta`` is an int64, key and value lengths are -1 (null) or within the
record, the header count is not negative and each header has a key; and the batch holds exactly
``recordsCount`` records and nothing after them.

A compressed section is decompressed under a cap (``max_decompressed``): a few kilobytes of gzip
can inflate to gigabytes, so decompression stops one byte past the cap rather than building the
whole section (``compression.py``).

Cost: records that all share the first one's layout -- plain records (no key, no headers, one
value length: what the SDK and REST produce write for fixed-size events) and fixed-size keyed
ones -- are checked column by column in a few C calls per batch once the first is walked
(``uniform.py``). Other sections of many records (keys of varying length, say) are checked
field by field for all records at once with numpy when it is installed (``columnar.py``, the
``server`` extra): one tight loop finds where each record starts, then a few array operations
per field. Whatever that does not prove valid, and every small batch, is walked by one loop
that reads varints in place and skips keys, values and headers without building an object for
them: that walk alone gives a verdict and its message, so both paths refuse the same batches.
"""

from __future__ import annotations

from headwater.errors import CorruptRecordError
from headwater.records.compression import DecompressedTooLargeError, decompress
from headwater.records.header import CODEC_MASK, HEADER_SIZE, BatchHeader, Buffer
from headwater.records.varint import VarintTooLongError, read_varint
from headwater_broker.validation.uniform import first_record_end, is_uniform_section

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


# Below this many records the walk is as quick as numpy's fixed cost per call.
_COLUMNAR_MIN_RECORDS = 32


def validate_records(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    *,
    max_decompressed: int | None = None,
    columnar: bool = True,
) -> None:
    """Raise CorruptRecordError unless every record of the batch at ``buf[pos:]`` decodes.

    ``header`` is the batch's checked header (``check_batch``): the batch is whole and its codec
    known. A compressed records section that decompresses to more than ``max_decompressed``
    bytes is refused as well, without decompressing further (None: no cap).
    ``columnar=False`` skips the numpy fast path (only to measure what it saves).
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    section = bytes(view[pos + HEADER_SIZE : pos + header.size])  # one copy
    codec = header.attributes & CODEC_MASK
    if codec:
        try:
            section = decompress(codec, section, max_decompressed)
        except DecompressedTooLargeError:
            raise DecompressedTooLargeError(
                f"batch at position {pos} decompresses to more than {max_decompressed} bytes, "
                "the cap on one batch's records"
            ) from None
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"batch at position {pos} does not decompress: {exc}"
            ) from None
    count = header.records_count
    if count > 1:
        first = first_record_end(section)
        if first is not None:
            # The first record checked alone; then, if every other record has its layout, the
            # section is valid as a whole without walking them.
            _walk(section[:first], 1, header.base_timestamp, pos)
            if is_uniform_section(section, first, count):
                return
    if (
        columnar
        and count >= _COLUMNAR_MIN_RECORDS
        and _columnar_valid(section, count, header.base_timestamp)
    ):
        return
    _walk(section, count, header.base_timestamp, pos)


def _columnar_valid(section: bytes, count: int, base_timestamp: int) -> bool:
    """Whether ``columnar.py`` proves the section valid; False without numpy (the client's
    install), which leaves the section to the walk."""
    try:
        from headwater_broker.validation.columnar import section_is_valid
    except ImportError:  # numpy is not installed: only the server extra brings it
        return False
    return section_is_valid(section, count, base_timestamp)


def _walk(data: bytes, count: int, base_timestamp: int, pos: int) -> None:
    """Walk the records section ``data`` of the batch at ``pos``; raise on the first fault.

    Written for speed, as ``headwater.records.decoder``'s loop: one- and two-byte varints (every
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
