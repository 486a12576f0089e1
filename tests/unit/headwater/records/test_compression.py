"""Codecs under a cap: decompression bombs stop one byte past it, without being inflated whole."""

from __future__ import annotations

import os
import sys
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest

from headwater.errors import CorruptRecordError
from headwater.records import Compression, compress, decompress
from headwater.records.compression import XERIAL_MAGIC, DecompressedTooLargeError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

CODECS = [c for c in Compression if c != Compression.NONE]
MIB = 1024 * 1024
BOMB_SIZE = 200 * MIB
_ZEROS = bytes(MIB)


def bomb(codec: Compression, size: int = BOMB_SIZE) -> bytes:
    """``size`` zero bytes compressed with ``codec``, built a mebibyte at a time: the test never
    holds what the bomb claims. Snappy's is xerial chunks of 32 KiB of zeros, as Kafka's Java
    client frames it."""
    chunks = size // MIB
    if codec == Compression.GZIP:
        gz = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return b"".join(gz.compress(_ZEROS) for _ in range(chunks)) + gz.flush()
    if codec == Compression.ZSTD:
        zs = zstd.ZstdCompressor()
        return b"".join(zs.compress(_ZEROS) for _ in range(chunks)) + zs.flush()
    if codec == Compression.LZ4:
        lz = lz4.frame.LZ4FrameCompressor()
        parts = [lz.begin(), *(lz.compress(_ZEROS) for _ in range(chunks)), lz.flush()]
        return b"".join(parts)
    assert codec == Compression.SNAPPY
    framed = compress(Compression.SNAPPY, bytes(32 * 1024))
    header, chunk = framed[:16], framed[16:]
    return header + chunk * (size // (32 * 1024))


def forged_snappy(claimed: int) -> bytes:
    """A raw snappy block whose preamble claims ``claimed`` bytes and holds one literal."""
    preamble = bytearray()
    while claimed >= 0x80:
        preamble.append(claimed & 0x7F | 0x80)
        claimed >>= 7
    preamble.append(claimed)
    return bytes(preamble) + b"\x00x"  # a one-byte literal


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_stops_past_the_cap_without_being_inflated(codec: Compression) -> None:
    data = bomb(codec)
    assert len(data) < BOMB_SIZE // 20
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedTooLargeError) as refused:
            decompress(codec, data, MIB)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        str(refused.value)
        == f"{codec.name.lower()}: the records decompress to more than {MIB} bytes"
    )
    assert isinstance(refused.value, CorruptRecordError)  # 40003 over the wire
    # What the decompression allocated: about the cap (twice, as output is joined), never the
    # 200 MiB the bomb claims.
    assert peak < 4 * MIB


@pytest.mark.parametrize("claimed", [MIB + 1, (1 << 32) - 1])
def test_a_snappy_length_past_the_cap_is_refused_before_decompressing(claimed: int) -> None:
    raw = forged_snappy(claimed)
    xerial = compress(Compression.SNAPPY, b"")[:16] + len(raw).to_bytes(4, "big") + raw
    assert xerial.startswith(XERIAL_MAGIC)
    for data in (raw, xerial):
        with pytest.raises(DecompressedTooLargeError, match=f"more than {MIB} bytes"):
            decompress(Compression.SNAPPY, data, MIB)


@pytest.mark.parametrize("codec", CODECS)
def test_output_of_exactly_the_cap_passes_and_one_byte_more_does_not(codec: Compression) -> None:
    data = os.urandom(1000) * 300
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    assert decompress(codec, packed) == data  # no cap
    with pytest.raises(DecompressedTooLargeError):
        decompress(codec, packed, len(data) - 1)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_the_cap_counts_every_frame(codec: Compression) -> None:
    data = os.urandom(1000) * 300
    packed = compress(codec, data) * 3  # three gzip members or frames, one after another
    assert decompress(codec, packed, 3 * len(data)) == data * 3
    with pytest.raises(DecompressedTooLargeError):
        decompress(codec, packed, 3 * len(data) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_or_damaged_input_is_corrupt_not_too_large(codec: Compression) -> None:
    packed = compress(codec, os.urandom(1000) * 300)
    for damaged in (packed[: len(packed) // 2], b"not compressed at all, in any codec"):
        with pytest.raises(CorruptRecordError) as refused:
            decompress(codec, damaged, MIB)
        assert not isinstance(refused.value, DecompressedTooLargeError)


def test_what_cramjam_compresses_decompresses_alike() -> None:
    """The decompressors differ from cramjam's; what cramjam (and so the SDK) writes still reads."""
    data = os.urandom(5000) * 40
    assert decompress(Compression.GZIP, bytes(cramjam.gzip.compress(data)), len(data)) == data
    assert decompress(Compression.LZ4, bytes(cramjam.lz4.compress(data)), len(data)) == data
    assert decompress(Compression.ZSTD, bytes(cramjam.zstd.compress(data)), len(data)) == data
