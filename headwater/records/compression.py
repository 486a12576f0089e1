"""Record-batch compression codecs (Kafka's attribute bits 0-2): none, gzip, snappy, lz4, zstd."""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from headwater.errors import CorruptRecordError


class Compression(IntEnum):
    """The codec id stored in a batch's attributes, as Kafka numbers them."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """``"none" | "gzip" | "snappy" | "lz4" | "zstd"`` (Kafka's ``compression.type`` values)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression {name!r}; expected one of none, gzip, snappy, lz4, zstd"
            ) from None


# Kafka's Java client writes snappy in xerial's SnappyOutputStream framing:
#   offset  size  field
#   0       8     magic b"\x82SNAPPY\x00"
#   8       4     version (1), big-endian
#   12      4     minimum compatible version (1), big-endian
#   16      ...   chunks: 4-byte big-endian compressed length, then a raw snappy block
# librdkafka and others may send raw (unframed) snappy, so reading accepts both.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_BE_INT32 = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(_XERIAL_HEADER):
        raise CorruptRecordError("snappy: truncated xerial header")
    view = memoryview(data)
    pos = len(_XERIAL_HEADER)
    out = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("snappy: truncated xerial chunk length")
        (size,) = _BE_INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("snappy: truncated xerial chunk")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(out)


def compress(codec: Compression | int, data: bytes) -> bytes:
    """Compress a batch's records section with ``codec`` (NONE returns ``data`` unchanged)."""
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordError(f"unknown compression codec {int(codec)}")


def decompress(codec: Compression | int, data: bytes) -> bytes:
    """Inverse of :func:`compress`; corrupt input raises CorruptRecordError."""
    if codec == Compression.NONE:
        return data
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{Compression(codec).name.lower()}: {exc}") from None
    raise CorruptRecordError(f"unknown compression codec {int(codec)}")
