"""Record-batch compression codecs (Kafka's attribute bits 0-2): none, gzip, snappy, lz4, zstd.

Compressing uses cramjam. Decompressing takes an optional cap on the output, because a broker
decompresses what any producer sends: a few kilobytes of gzip can claim gigabytes. Under a cap
every codec is read incrementally and stops one byte past it, so a bomb costs at most the cap in
memory, never what it claims: gzip through zlib's ``decompressobj`` and zstd and lz4 frames
through their decompressors' ``max_length``; snappy states each block's decompressed length in
the block's first bytes, so that length is checked before the block is decompressed.
"""

from __future__ import annotations

import struct
import sys
import zlib
from enum import IntEnum
from typing import Protocol

import cramjam
import lz4.frame

from headwater.errors import CorruptRecordError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd


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


class DecompressedTooLargeError(CorruptRecordError):
    """Compressed records that decompress past the cap they are read under (40003, as any
    corrupt batch: over the wire it is a CorruptRecordError)."""


class _OverCapError(Exception):
    """A codec's output passed the cap; :func:`decompress` says which codec and cap."""


def _snappy_block(block: bytes | memoryview, room: int | None) -> bytes:
    """One raw snappy block, refused before decompressing when it states more than ``room``."""
    if room is not None and cramjam.snappy.decompress_raw_len(block) > room:
        raise _OverCapError
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, cap: int | None) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, cap)
    if len(data) < len(_XERIAL_HEADER):
        raise CorruptRecordError("snappy: truncated xerial header")
    view = memoryview(data)
    pos = len(_XERIAL_HEADER)
    out = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("snappy: truncated xerial chunk length")
        (size,) = _BE_INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("snappy: truncated xerial chunk")
        block = _snappy_block(view[pos : pos + size], None if cap is None else cap - total)
        out.append(block)
        total += len(block)
        pos += size
    return b"".join(out)


class _Decompressor(Protocol):
    """What zlib's, zstd's and lz4's incremental decompressors have in common."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int, /) -> bytes: ...


def _gzip() -> _Decompressor:
    return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # the gzip container only


def _zstd() -> _Decompressor:
    return zstd.ZstdDecompressor()


def _lz4() -> _Decompressor:
    decompressor: _Decompressor = lz4.frame.LZ4FrameDecompressor()
    return decompressor


_STREAMS = {Compression.GZIP: _gzip, Compression.ZSTD: _zstd, Compression.LZ4: _lz4}


def _inflate(codec: Compression, data: bytes, cap: int | None) -> bytes:
    """Every frame (gzip member) of ``data``, one after another, stopping past ``cap`` bytes.

    Each call asks for at most one byte more than the room left, so output that reaches that
    byte has passed the cap, and nothing more is decompressed.
    """
    out: list[bytes] = []
    total = 0
    rest = data
    while True:
        decompressor = _STREAMS[codec]()
        if cap is not None:
            chunk = decompressor.decompress(rest, cap - total + 1)
        else:  # no limit: zlib reads a max_length of 0 so, zstd and lz4 read -1
            chunk = decompressor.decompress(rest, 0 if codec == Compression.GZIP else -1)
        total += len(chunk)
        if cap is not None and total > cap:
            raise _OverCapError
        if not decompressor.eof:
            raise CorruptRecordError(f"{codec.name.lower()}: the compressed data ends early")
        out.append(chunk)
        rest = decompressor.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)


def decompress(codec: Compression | int, data: bytes, cap: int | None = None) -> bytes:
    """Inverse of :func:`compress`; corrupt input raises CorruptRecordError.

    With ``cap``, output of more than ``cap`` bytes raises DecompressedTooLargeError, having
    decompressed at most ``cap + 1`` bytes. Without, the output is as large as the input says:
    only for input whose decompressed size was capped already (a batch a broker accepted).
    """
    if codec == Compression.NONE:
        return data
    try:
        known = Compression(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec {int(codec)}") from None
    try:
        if known == Compression.SNAPPY:
            return _snappy_decompress(data, cap)
        return _inflate(known, data, cap)
    except _OverCapError:
        raise DecompressedTooLargeError(
            f"{known.name.lower()}: the records decompress to more than {cap} bytes"
        ) from None
    except (cramjam.DecompressionError, zlib.error, zstd.ZstdError, RuntimeError) as exc:
        # lz4.frame raises RuntimeError for a damaged frame.
        raise CorruptRecordError(f"{known.name.lower()}: {exc}") from None
