"""Kafka RecordBatch v2: the byte layout of stored and transferred records, encoded and decoded.

A batch is a 61-byte header followed by its records (compressed as one block when the codec is
not NONE). All integers are big-endian; the CRC-32C covers ``attributes`` through the end of the
batch, so ``baseOffset``, ``batchLength`` and ``partitionLeaderEpoch`` can be rewritten (the broker
assigns ``baseOffset``) without recomputing it.

======  ====  =====================  ===============================================================
offset  size  field                  meaning
======  ====  =====================  ===============================================================
0       8     baseOffset             offset of the first record (set by the broker on append)
8       4     batchLength            bytes after this field: total size - 12
12      4     partitionLeaderEpoch   leader epoch at append (-1 from producers)
16      1     magic                  2
17      4     crc                    CRC-32C (unsigned) of bytes 21 .. end
21      2     attributes             bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
                                     4 transactional, 5 control, 6 delete horizon set
23      4     lastOffsetDelta        offset of the last record - baseOffset
27      8     baseTimestamp          timestamp of the first record
35      8     maxTimestamp           largest record timestamp (the append time for LogAppendTime)
43      8     producerId             -1 unless idempotent/transactional
51      2     producerEpoch          -1 unless idempotent/transactional
53      4     baseSequence           sequence of the first record, -1 without a producer id
57      4     recordsCount           number of records
61      ...   records                each as below; one compressed block when codec != NONE
======  ====  =====================  ===============================================================

Each record (varint = zig-zag base-128, see ``varint.py``)::

    length varint (bytes after it) | attributes int8 (0) | timestampDelta varlong |
    offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) |
    value | headerCount varint | headers: (keyLength varint, key utf-8, valueLength varint, value)*
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import accumulate, repeat
from typing import TypeVar, cast

from headwater.errors import CorruptRecordError
from headwater.records.compression import Compression, compress, decompress
from headwater.records.crc import crc32c
from headwater.records.varint import NULL_LENGTH, SMALL_LIMIT, SMALL_VARINTS, encode_varint

Buffer = bytes | bytearray | memoryview
T = TypeVar("T")

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size
assert HEADER_SIZE == 61

# Field offsets derived from the layout rather than typed in.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = struct.calcsize(">q")
LEADER_EPOCH_OFFSET = struct.calcsize(">qi")
MAGIC_OFFSET = struct.calcsize(">qii")
CRC_OFFSET = struct.calcsize(">qiib")
ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")
LAST_OFFSET_DELTA_OFFSET = struct.calcsize(">qiibIh")
BASE_TIMESTAMP_OFFSET = struct.calcsize(">qiibIhi")
MAX_TIMESTAMP_OFFSET = struct.calcsize(">qiibIhiq")
RECORDS_COUNT_OFFSET = struct.calcsize(">qiibIhiqqqhi")
LOG_OVERHEAD = struct.calcsize(">qi")  # bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_INT32_MAX = (1 << 31) - 1

_Q = struct.Struct(">q")
_I = struct.Struct(">I")
_H = struct.Struct(">h")


class TimestampType(IntEnum):
    """Bit 3 of the attributes: who set the record timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one RecordBatch v2, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; -1 without one. Wraps past int32 max to 0, as Kafka's."""
        if self.base_sequence < 0:
            return -1
        if self.base_sequence > _INT32_MAX - self.last_offset_delta:
            return self.last_offset_delta - (_INT32_MAX - self.base_sequence) - 1
        return self.base_sequence + self.last_offset_delta


@dataclass(slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header at ``buf[pos:]`` without checking the CRC or that the body is present.

    Raises CorruptRecordError when fewer than 61 bytes remain, magic is not 2 or batchLength is
    below the header's own size.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header at position {pos}: {len(buf) - pos} of {HEADER_SIZE} bytes"
        )
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"unsupported magic {header.magic} at position {pos}: only RecordBatch v2 (magic 2)"
        )
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {header.batch_length} at position {pos} is below the minimum "
            f"{MIN_BATCH_LENGTH}"
        )
    return header


def _check(buf: Buffer, pos: int, verify_crc: bool) -> BatchHeader:
    header = parse_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"truncated batch at position {pos}: {header.size} bytes declared, "
            f"{len(buf) - pos} present"
        )
    if header.records_count < 0:
        raise CorruptRecordError(f"negative records count {header.records_count} at {pos}")
    if header.last_offset_delta < 0:
        raise CorruptRecordError(
            f"negative last offset delta {header.last_offset_delta} at position {pos}"
        )
    if header.records_count and header.last_offset_delta < header.records_count - 1:
        raise CorruptRecordError(
            f"last offset delta {header.last_offset_delta} at position {pos} is below "
            f"records count - 1 ({header.records_count - 1})"
        )
    if header.attributes & _CODEC_MASK > Compression.ZSTD:
        raise CorruptRecordError(
            f"unknown compression codec {header.attributes & _CODEC_MASK} at position {pos}"
        )
    if verify_crc:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        computed = crc32c(view[pos + ATTRIBUTES_OFFSET : end])
        if computed != header.crc:
            raise CorruptRecordError(
                f"CRC mismatch in batch at position {pos}: stored {header.crc:#010x}, "
                f"computed {computed:#010x}"
            )
    return header


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch of concatenated batches in ``buf``.

    Every batch is checked whole (length, CRC, magic, counts) before it is yielded; the first
    problem raises CorruptRecordError naming its position.
    """
    pos = 0
    size = len(buf)
    while pos < size:
        header = _check(buf, pos, verify_crc)
        yield pos, header
        pos += header.size


def valid_prefix(buf: Buffer) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Length of the longest prefix of whole, CRC-valid batches, and their positions and headers.

    Never raises: crash recovery cuts a log at the returned length.
    """
    found: list[tuple[int, BatchHeader]] = []
    end = 0
    try:
        for pos, header in iter_batches(buf):
            found.append((pos, header))
            end = pos + header.size
    except CorruptRecordError:
        pass
    return end, found


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Rewrite the batch's baseOffset in place (it is outside the CRC)."""
    _Q.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_log_append_time(buf: bytearray, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as its maxTimestamp, and re-seal the CRC.

    As Kafka does for ``message.timestamp.type=LogAppendTime`` topics: readers then report that
    timestamp for every record of the batch.
    """
    (attributes,) = _H.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _H.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_BIT)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (length,) = struct.unpack_from(">i", buf, pos + LENGTH_OFFSET)
    end = pos + length + LOG_OVERHEAD
    _I.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]))


# attributes 0 + timestampDelta 0 + offsetDelta, and the same followed by a null key's length.
_LEAD: tuple[bytes, ...] = tuple(b"\x00\x00" + SMALL_VARINTS[i] for i in range(SMALL_LIMIT))
_LEAD_NULL_KEY: tuple[bytes, ...] = tuple(lead + NULL_LENGTH for lead in _LEAD)

RecordTuple = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int | None = None,
    timestamps: Sequence[int] | None = None,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """Encode ``(key, value, headers)`` tuples as one RecordBatch v2.

    Every record gets ``timestamp_ms`` (default: now) unless ``timestamps`` gives one per record.
    This is the producer's hot loop: small lengths come from a precomputed varint table and the
    batch is joined once.
    """
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000) if timestamps is None else timestamps[0]
    small = SMALL_VARINTS
    null = NULL_LENGTH
    parts: list[bytes] = []
    append = parts.append
    plain = None if timestamps is not None else _plain_section(records, count)
    if plain is not None:
        base_timestamp = max_timestamp = timestamp_ms
        parts = [plain]
    elif timestamps is None:
        base_timestamp = max_timestamp = timestamp_ms
        # Per record: length | attributes 0, timestampDelta 0, offsetDelta (+ keyLength) from
        # the precomputed lead tables | key | valueLength | value | headers. One extend per record.
        extend = parts.extend
        lead_table = _LEAD
        lead_null_key = _LEAD_NULL_KEY
        for delta, (key, value, headers) in enumerate(records):
            if delta < SMALL_LIMIT:
                if key is None:
                    lead = lead_null_key[delta]
                    key = b""
                else:
                    n = len(key)
                    lead = lead_table[delta] + (small[n] if n < SMALL_LIMIT else encode_varint(n))
            else:
                lead = b"\x00\x00" + encode_varint(delta)
                if key is None:
                    lead += null
                    key = b""
                else:
                    lead += encode_varint(len(key))
            if value is None:
                value_part = null
                value = b""
            else:
                n = len(value)
                value_part = small[n] if n < SMALL_LIMIT else encode_varint(n)
            header_part = _encode_headers(headers) if headers else b"\x00"
            size = len(lead) + len(key) + len(value_part) + len(value) + len(header_part)
            extend(
                (
                    small[size] if size < SMALL_LIMIT else encode_varint(size),
                    lead,
                    key,
                    value_part,
                    value,
                    header_part,
                )
            )
    else:
        if len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} records")
        base_timestamp = timestamps[0]
        max_timestamp = max(timestamps)
        for delta, ((key, value, headers), ts) in enumerate(zip(records, timestamps, strict=True)):
            body = b"".join(
                (
                    b"\x00",
                    encode_varint(ts - base_timestamp),
                    encode_varint(delta),
                    null if key is None else encode_varint(len(key)) + key,
                    null if value is None else encode_varint(len(value)) + value,
                    _encode_headers(headers) if headers else b"\x00",
                )
            )
            append(encode_varint(len(body)))
            append(body)
    return _frame(
        b"".join(parts),
        count,
        compression,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        base_offset,
        partition_leader_epoch,
        is_transactional,
    )


def _frame(
    body: bytes,
    count: int,
    compression: Compression,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    partition_leader_epoch: int,
    is_transactional: bool,
) -> bytes:
    """The batch around a records section: compressed, header packed, CRC over both."""
    if compression != Compression.NONE:
        body = compress(compression, body)
    attributes = int(compression) | (_TRANSACTIONAL_BIT if is_transactional else 0)
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(body, crc32c(tail))
    head = struct.pack(
        ">qiibI",
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        MAGIC,
        crc,
    )
    return b"".join((head, tail, body))


def encode_values_batch(
    values: Sequence[bytes | None],
    *,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int,
) -> bytes:
    """:func:`encode_batch` of ``(None, value, ())`` records, all at ``timestamp_ms``: the same
    bytes, without building the record tuples (a producer of unkeyed records keeps only values).
    """
    count = len(values)
    plain = _plain_values_section(values, count)
    if plain is None:
        return encode_batch(
            [(None, v, ()) for v in values],
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            timestamp_ms=timestamp_ms,
        )
    return _frame(
        plain,
        count,
        compression,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
        -1,
        False,
    )


# The plain-record fast path: records with a null key, no headers, the batch's timestamp and one
# value length (what most producers of fixed-size events send). Such a record's bytes are
#   length | 00 attrs | 00 timestampDelta | offsetDelta | 01 null key | valueLength | value | 00
# so everything around the value depends only on the value's length n and the offsetDelta. Per n a
# table holds, per offsetDelta, the previous record's trailing 00 and the bytes before the value;
# the records section is then one join of table entries interleaved with the values by slice
# assignment: no Python code runs per record.
_PLAIN_VALUE_LIMIT = 1 << 14
_PLAIN_TABLES_KEPT = 8  # distinct value lengths whose tables are kept (each <= count entries)
# Shared by every thread (producer workers encode in parallel): a table is an immutable tuple,
# replaced whole when a longer one is needed, so a reader never sees one half-built.
_plain_tables: dict[int, tuple[bytes, ...]] = {}


def _plain_table(n: int, count: int) -> tuple[bytes, ...]:
    table = _plain_tables.get(n, ())
    if len(table) < count:
        middle = NULL_LENGTH + SMALL_VARINTS[n]
        rest = 2 + len(middle) + n + 1  # record length without the offsetDelta's bytes
        table += tuple(
            b"\x00" + SMALL_VARINTS[rest + len(delta)] + b"\x00\x00" + delta + middle
            for delta in SMALL_VARINTS[len(table) : count]
        )
        if len(_plain_tables) >= _PLAIN_TABLES_KEPT:
            _plain_tables.clear()
        _plain_tables[n] = table
    return table


def _plain_section(records: Sequence[RecordTuple], count: int) -> bytes | None:
    """The records section of plain records (see above), or None if any record is not plain."""
    if count > SMALL_LIMIT:
        return None
    keys, values, headers = zip(*records, strict=True)
    if keys.count(None) != count or any(headers):
        return None
    return _plain_values_section(values, count)


def _plain_values_section(values: Sequence[bytes | None], count: int) -> bytes | None:
    """The records section of null-key, header-less records with these values, or None unless
    they all have one length (and there are at most SMALL_LIMIT)."""
    if count > SMALL_LIMIT:
        return None
    # A null value makes len() raise: the values are then not plain. Past that, all are bytes.
    sized = cast("Sequence[bytes]", values)
    try:
        n = len(sized[0])
        if n >= _PLAIN_VALUE_LIMIT - 32 or list(map(len, sized)).count(n) != count:
            return None
    except TypeError:
        return None
    return _join_plain(_plain_table(n, count)[:count], sized, count)


def _join_plain(table: Sequence[bytes], values: Sequence[bytes], count: int) -> bytes:
    parts: list[bytes] = [b"\x00"] * (2 * count + 1)
    parts[0 : 2 * count : 2] = table
    parts[1 : 2 * count : 2] = values
    parts[0] = parts[0][1:]  # the first record has no record before it
    return b"".join(parts)


def _plain_values(data: bytes, count: int) -> list[bytes] | None:
    """The values of ``data`` if it is exactly a plain records section of ``count`` records
    (see ``_plain_section``), else None (then the general decoder reads or rejects it).

    The first record gives the value length n; the values are sliced where plain records of
    length n put them, and the section is accepted only if re-encoding them gives ``data`` byte
    for byte, so nothing is assumed that was not checked.
    """
    if not 0 < count <= SMALL_LIMIT or len(data) < 7:
        return None
    i = 1 if data[0] < 0x80 else 2  # the first record's length varint
    try:
        if data[i : i + 4] != b"\x00\x00\x00\x01" or (data[i + 4] >= 0x80 and data[i + 5] >= 0x80):
            return None
        n, _ = _varint(data, i + 4)
    except IndexError:  # too short for a plain record: the general decoder says what is wrong
        return None
    if not 0 <= n < _PLAIN_VALUE_LIMIT - 32:
        return None
    table = _plain_table(n, count)[:count]
    # Record d's value starts after entries 0..d and values 0..d-1, less the first entry's
    # leading 00 (not in the section): -1 - n + sum(len(entry) + n for entries 0..d).
    starts = accumulate(map(n.__add__, map(len, table)), initial=-1 - n)
    next(starts)
    values = [data[start : start + n] for start in starts]
    return values if _join_plain(table, values, count) == data else None


def _encode_headers(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for name, value in headers:
        raw = name.encode()
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(NULL_LENGTH)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def decode_batch(buf: Buffer, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``buf[pos:]``: its header and records with absolute offsets/timestamps.

    The CRC is verified and the records section decompressed. For LogAppendTime batches every
    record reports the batch's maxTimestamp, as Kafka's readers do.
    """
    return decode_batch_as(buf, pos, Record)


RecordFactory = Callable[[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]], T]


def decode_batch_as(
    buf: Buffer, pos: int, factory: RecordFactory[T]
) -> tuple[BatchHeader, list[T]]:
    """:func:`decode_batch`, building each record as ``factory(offset, timestamp, key, value,
    headers)``: a consumer makes its own record type directly instead of converting Records."""
    header = _check(buf, pos, True)
    end = pos + header.size
    data: bytes = bytes(buf[pos + HEADER_SIZE : end])
    if header.attributes & _CODEC_MASK:
        data = decompress(header.attributes & _CODEC_MASK, data)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.max_timestamp if header.attributes & _TIMESTAMP_TYPE_BIT else None
    plain = _plain_values(data, header.records_count)
    if plain is not None:
        ts = base_ts if log_append is None else log_append
        offsets = range(base_offset, base_offset + header.records_count)
        # A fresh empty headers list per record (callers may own them), made by iter(list, ...).
        fresh_lists: Iterator[list[tuple[str, bytes | None]]] = iter(list, None)
        return header, list(map(factory, offsets, repeat(ts), repeat(None), plain, fresh_lists))
    records: list[T] = []
    append = records.append
    i = 0
    n = len(data)
    try:
        for _ in range(header.records_count):
            # Varints are decoded inline: a function call per field would dominate.
            b = data[i]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:  # two bytes: records of 64 B to 8 KiB
                    z = (b & 0x7F) | (c << 7)
                    length = (z >> 1) ^ -(z & 1)
                    i += 2
                else:
                    length, i = _varint_slow(data, i)
            record_end = i + length
            if length < 0 or record_end > n:
                raise CorruptRecordError(
                    f"record {len(records)} of batch at {pos} overruns the batch"
                )
            # attributes (unused) at i; the common one-byte timestampDelta and offsetDelta are
            # decoded without a call.
            b = data[i + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                i += 2
            else:
                ts_delta, i = _varint_slow(data, i + 1)
            b = data[i]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:  # two bytes: deltas 64 to 8191
                    z = (b & 0x7F) | (c << 7)
                    offset_delta = (z >> 1) ^ -(z & 1)
                    i += 2
                else:
                    offset_delta, i = _varint_slow(data, i)
            b = data[i]
            if b == 1:  # -1: null key, the most common key
                key = None
                i += 1
            else:
                key_len, i = _varint(data, i)
                if key_len < 0:
                    raise CorruptRecordError(f"key length {key_len} in batch at {pos}")
                key = data[i : i + key_len]
                i += key_len
            b = data[i]
            if b < 0x80:
                value_len = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                c = data[i + 1]
                if c < 0x80:
                    z = (b & 0x7F) | (c << 7)
                    value_len = (z >> 1) ^ -(z & 1)
                    i += 2
                else:
                    value_len, i = _varint_slow(data, i)
            if value_len < 0:
                value = None
            else:
                value = data[i : i + value_len]
                i += value_len
            if data[i] == 0:
                i += 1
                headers: list[tuple[str, bytes | None]] = []
                header_count = 0
            else:
                header_count, i = _varint(data, i)
                headers = []
            for _h in range(header_count):
                hk_len, i = _varint(data, i)
                if hk_len < 0:
                    raise CorruptRecordError(f"null header key in batch at {pos}")
                name = data[i : i + hk_len].decode("utf-8", "replace")
                i += hk_len
                hv_len, i = _varint(data, i)
                hv: bytes | None
                if hv_len < 0:
                    hv = None
                else:
                    hv = data[i : i + hv_len]
                    i += hv_len
                headers.append((name, hv))
            if i != record_end:
                raise CorruptRecordError(
                    f"record {len(records)} of batch at {pos}: length {length} does not match "
                    "its fields"
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
    except IndexError:
        raise CorruptRecordError(f"records of batch at {pos} end early") from None
    if i != n:
        raise CorruptRecordError(f"{n - i} bytes after the last record of batch at {pos}")
    return header, records


def _varint(data: bytes, i: int) -> tuple[int, int]:
    b = data[i]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), i + 1
    return _varint_slow(data, i)


def _varint_slow(data: bytes, i: int) -> tuple[int, int]:
    z = 0
    shift = 0
    while True:
        b = data[i]
        i += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), i
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes ending at {i}")


def decode_batches(buf: Buffer) -> Iterator[Record]:
    """Every record of concatenated batches, in order."""
    for pos, _header in iter_batches(buf, verify_crc=False):
        yield from decode_batch(buf, pos)[1]
