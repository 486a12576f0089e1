"""Encoding records into a RecordBatch v2: the records section, then the header around it.

The records section is written in the layout ``grammar.py`` documents and reads.

Plain records (null key, no headers, one value length) take the table-driven path of
``plain.py``; the bytes are the same either way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from headwater.records.compression import Compression
from headwater.records.header import BatchFields, frame_batch
from headwater.records.plain import plain_section
from headwater.records.varint import NULL_LENGTH, SMALL_LIMIT, SMALL_VARINTS, encode_varint

Headers = Sequence[tuple[str, bytes | None]]
RecordTuple = tuple[bytes | None, bytes | None, Headers]
"""One record to encode: ``(key, value, headers)``."""

# attributes 0 + timestampDelta 0 + offsetDelta, and the same followed by a null key's length.
_LEAD: tuple[bytes, ...] = tuple(b"\x00\x00" + SMALL_VARINTS[i] for i in range(SMALL_LIMIT))
_LEAD_NULL_KEY: tuple[bytes, ...] = tuple(lead + NULL_LENGTH for lead in _LEAD)


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
    """
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000) if timestamps is None else timestamps[0]
    fields = BatchFields(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
    )
    if timestamps is not None:
        if len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} records")
        section = _timed_section(records, timestamps)
        return frame_batch(
            section, count, fields, base_timestamp=timestamps[0], max_timestamp=max(timestamps)
        )
    plain = _plain_records_section(records, count)
    section = plain if plain is not None else _section(records)
    return frame_batch(
        section, count, fields, base_timestamp=timestamp_ms, max_timestamp=timestamp_ms
    )


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
    section = plain_section(values)
    if section is None:
        section = _section([(None, v, ()) for v in values])
    fields = BatchFields(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return frame_batch(
        section, len(values), fields, base_timestamp=timestamp_ms, max_timestamp=timestamp_ms
    )


def _plain_records_section(records: Sequence[RecordTuple], count: int) -> bytes | None:
    """The plain records section of ``records``, or None if any record is not plain."""
    if count > SMALL_LIMIT:
        return None
    keys, values, headers = zip(*records, strict=True)
    if keys.count(None) != count or any(headers):
        return None
    return plain_section(values)


def _section(records: Sequence[RecordTuple]) -> bytes:
    """The records section, every record at the batch's timestamp.

    The producer's hot loop: per record, the length, the attributes 0, timestampDelta 0,
    offsetDelta (+ keyLength) from the precomputed lead tables, the key, valueLength, value and
    headers, in one extend; the section is joined once.
    """
    small = SMALL_VARINTS
    null = NULL_LENGTH
    parts: list[bytes] = []
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
    return b"".join(parts)


def _timed_section(records: Sequence[RecordTuple], timestamps: Sequence[int]) -> bytes:
    """The records section with a timestamp per record (deltas from the first)."""
    null = NULL_LENGTH
    base_timestamp = timestamps[0]
    parts: list[bytes] = []
    append = parts.append
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
    return b"".join(parts)


def _encode_headers(headers: Headers) -> bytes:
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
