"""Decoding a RecordBatch v2 into records: the batch checked, its records section walked once.

The batch header is checked and the section decompressed here; its records are read by
:func:`headwater.records.grammar.read_records` (plain sections by ``plain.py``'s table).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Generic, NamedTuple, TypeVar

from headwater.records.compression import decompress
from headwater.records.grammar import RecordFactory, RecordHeaders, read_records
from headwater.records.header import (
    CODEC_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Buffer,
    check_batch,
)
from headwater.records.plain import plain_values

T = TypeVar("T")


@dataclass(slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders


class DecodedBatch(NamedTuple, Generic[T]):
    """A batch's header and its records."""

    header: BatchHeader
    records: list[T]


def decode_batch(
    buf: Buffer, pos: int = 0, *, max_decompressed: int | None = None
) -> DecodedBatch[Record]:
    """Decode the batch at ``buf[pos:]``: its header and records with absolute offsets/timestamps.

    The CRC is verified and the records section decompressed: a section that decompresses to
    more than ``max_decompressed`` bytes raises DecompressedTooLargeError (a CorruptRecordError)
    without being decompressed further (None: no cap, for batches a broker accepted under its
    own). For LogAppendTime batches every record reports the batch's maxTimestamp, as Kafka's
    readers do.
    """
    return decode_batch_as(buf, pos, Record, max_decompressed=max_decompressed)


def decode_batch_as(
    buf: Buffer, pos: int, factory: RecordFactory[T], *, max_decompressed: int | None = None
) -> DecodedBatch[T]:
    """:func:`decode_batch`, building each record as ``factory(offset, timestamp, key, value,
    headers)``: a consumer makes its own record type directly instead of converting Records."""
    header = check_batch(buf, pos, True)
    section: bytes = bytes(buf[pos + HEADER_SIZE : pos + header.size])
    if header.attributes & CODEC_MASK:
        section = decompress(header.attributes & CODEC_MASK, section, max_decompressed)
    log_append = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    plain = plain_values(section, header.records_count)
    if plain is not None:
        base_offset = header.base_offset
        ts = header.base_timestamp if log_append is None else log_append
        offsets = range(base_offset, base_offset + header.records_count)
        # A fresh empty headers list per record (callers may own them), made by iter(list, ...).
        fresh_lists: Iterator[RecordHeaders] = iter(list, None)
        records = list(map(factory, offsets, repeat(ts), repeat(None), plain, fresh_lists))
        return DecodedBatch(header, records)
    return DecodedBatch(header, read_records(section, header, pos, factory))
