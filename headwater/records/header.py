"""The 61-byte RecordBatch v2 header: its layout, packing, parsing, checks and in-place rewrites.

A batch is this header followed by its records section (compressed as one block when the codec
is not NONE; see ``encoder.py`` for the records). All integers are big-endian; the CRC-32C covers
``attributes`` through the end of the batch, so ``baseOffset``, ``batchLength`` and
``partitionLeaderEpoch`` can be rewritten (the broker assigns ``baseOffset``) without
recomputing it.

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
61      ...   records                see ``encoder.py``; one compressed block when codec != NONE
======  ====  =====================  ===============================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from headwater.errors import CorruptRecordError
from headwater.records.compression import Compression, compress
from headwater.records.crc import crc32c

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size
assert HEADER_SIZE == 61

# Field offsets derived from the layout rather than typed in.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = struct.calcsize(">q")
LEADER_EPOCH_OFFSET = struct.calcsize(">qi")
CRC_OFFSET = struct.calcsize(">qiib")
ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")
MAX_TIMESTAMP_OFFSET = struct.calcsize(">qiibIhiq")
LOG_OVERHEAD = struct.calcsize(">qi")  # bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_INT32_MAX = (1 << 31) - 1

# The header packed in two parts around the CRC: the part before it, and the part it covers.
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">I")
_H = struct.Struct(">h")
_LENGTH = struct.Struct(">i")


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
        return Compression(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_BIT else 0)

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


@dataclass(frozen=True, slots=True)
class BatchFields:
    """What a writer chooses for the header of a batch it frames (the rest is computed)."""

    compression: Compression = Compression.NONE
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    base_offset: int = 0
    partition_leader_epoch: int = -1
    is_transactional: bool = False


def frame_batch(
    section: bytes, count: int, fields: BatchFields, *, base_timestamp: int, max_timestamp: int
) -> bytes:
    """The batch around a records section of ``count`` records: compressed, header packed, CRC
    over both."""
    compression = fields.compression
    if compression != Compression.NONE:
        section = compress(compression, section)
    attributes = int(compression) | (_TRANSACTIONAL_BIT if fields.is_transactional else 0)
    tail = _TAIL.pack(
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        fields.producer_id,
        fields.producer_epoch,
        fields.base_sequence,
        count,
    )
    crc = crc32c(section, crc32c(tail))
    head = _HEAD.pack(
        fields.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(section),
        fields.partition_leader_epoch,
        MAGIC,
        crc,
    )
    return b"".join((head, tail, section))


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


def check_batch(buf: Buffer, pos: int, verify_crc: bool) -> BatchHeader:
    """The header of the batch at ``buf[pos:]`` once the whole batch is checked: present, counts
    consistent, a known codec and (with ``verify_crc``) an intact CRC; else CorruptRecordError."""
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
    if header.attributes & CODEC_MASK > Compression.ZSTD:
        raise CorruptRecordError(
            f"unknown compression codec {header.attributes & CODEC_MASK} at position {pos}"
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


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Rewrite the batch's baseOffset in place (it is outside the CRC)."""
    _Q.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Rewrite the batch's partitionLeaderEpoch in place (it is outside the CRC).

    The leader stamps its epoch into every batch it appends; followers keep it as stored.
    """
    _LENGTH.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as its maxTimestamp, and re-seal the CRC.

    As Kafka does for ``message.timestamp.type=LogAppendTime`` topics: readers then report that
    timestamp for every record of the batch.
    """
    (attributes,) = _H.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _H.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (length,) = _LENGTH.unpack_from(buf, pos + LENGTH_OFFSET)
    end = pos + length + LOG_OVERHEAD
    _I.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]))
