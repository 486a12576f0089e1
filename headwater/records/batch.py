"""Concatenated RecordBatch v2, as logs store them and requests carry them: walked and checked.

Also the batch API in one import for its callers (brokers, the consumer, Spark); its parts are
``header.py`` (layout, checks, rewrites), ``encoder.py``, ``decoder.py`` and ``plain.py`` (the
plain-record fast path).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from headwater.errors import CorruptRecordError
from headwater.records.decoder import DecodedBatch, Record, decode_batch, decode_batch_as
from headwater.records.encoder import RecordTuple, encode_batch, encode_values_batch
from headwater.records.grammar import RecordFactory
from headwater.records.header import (
    HEADER_SIZE,
    BatchHeader,
    Buffer,
    TimestampType,
    check_batch,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

__all__ = [
    "HEADER_SIZE",
    "BatchHeader",
    "Buffer",
    "DecodedBatch",
    "PlacedBatch",
    "Record",
    "RecordFactory",
    "RecordTuple",
    "TimestampType",
    "ValidPrefix",
    "decode_batch",
    "decode_batch_as",
    "decode_batches",
    "encode_batch",
    "encode_values_batch",
    "iter_batches",
    "parse_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "valid_prefix",
]


# (position in the buffer, header). A plain tuple rather than a NamedTuple for now: the broker's
# log annotates lists of these as list[tuple[int, BatchHeader]], which a NamedTuple list is not.
PlacedBatch = tuple[int, BatchHeader]


class ValidPrefix(NamedTuple):
    """How many leading bytes of a buffer are whole, valid batches, and those batches."""

    length: int
    batches: list[PlacedBatch]


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[PlacedBatch]:
    """Yield ``(position, header)`` for each batch of concatenated batches in ``buf``.

    Every batch is checked whole (length, CRC, magic, counts) before it is yielded; the first
    problem raises CorruptRecordError naming its position.
    """
    pos = 0
    size = len(buf)
    while pos < size:
        header = check_batch(buf, pos, verify_crc)
        yield pos, header
        pos += header.size


def valid_prefix(buf: Buffer) -> ValidPrefix:
    """Length of the longest prefix of whole, CRC-valid batches, and their positions and headers.

    Never raises: crash recovery cuts a log at the returned length.
    """
    found: list[PlacedBatch] = []
    end = 0
    try:
        for pos, header in iter_batches(buf):
            found.append((pos, header))
            end = pos + header.size
    except CorruptRecordError:
        pass
    return ValidPrefix(end, found)


def decode_batches(buf: Buffer) -> Iterator[Record]:
    """Every record of concatenated batches, in order."""
    for pos, _header in iter_batches(buf, verify_crc=False):
        yield from decode_batch(buf, pos)[1]
