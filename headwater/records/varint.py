"""Zig-zag varints (Kafka's varint and varlong): encoding, decoding, precomputed small values."""

from __future__ import annotations

from typing import NamedTuple

from headwater.errors import CorruptRecordError


class VarintTooLongError(CorruptRecordError):
    """A varint of more than 10 bytes (callers that know which batch it is in say so)."""


# Record fields are mostly small (offset deltas, key/value lengths, -1 for null), so encodings of
# -1..SMALL_LIMIT-1 are built once; the encoder hot loops index this table instead of calling.
SMALL_LIMIT = 1 << 14


def _encode_unsigned(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _zigzag(n: int) -> int:
    # (n << 1) ^ (n >> 63) equals Kafka's int32 zig-zag for every int32 and its int64 one for int64.
    return (n << 1) ^ (n >> 63)


SMALL_VARINTS: tuple[bytes, ...] = tuple(_encode_unsigned(_zigzag(i)) for i in range(SMALL_LIMIT))
"""``SMALL_VARINTS[n]`` is the varint of ``n`` for 0 <= n < SMALL_LIMIT."""

NULL_LENGTH = _encode_unsigned(_zigzag(-1))
"""The varint of -1: the length of a null key or value."""


def encode_varint(n: int) -> bytes:
    """The zig-zag varint of ``n`` (works for Kafka's varint and varlong ranges)."""
    if 0 <= n < SMALL_LIMIT:
        return SMALL_VARINTS[n]
    if n < -(1 << 63) or n >= (1 << 63):
        raise ValueError(f"{n} does not fit a varlong")
    return _encode_unsigned(_zigzag(n))


class DecodedVarint(NamedTuple):
    """A decoded varint and the position just after its bytes."""

    value: int
    end: int


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> DecodedVarint:
    """The zig-zag varint at ``buf[pos]`` and the position after it: the one decoder of varints.

    Raises IndexError when ``buf`` ends inside the varint (a caller walking a records section
    reports that as its own truncation) and CorruptRecordError when it is longer than a varlong
    (10 bytes). The records decoder reads one- and two-byte varints inline and calls this for
    longer ones.
    """
    b = buf[pos]
    if b < 0x80:
        return DecodedVarint((b >> 1) ^ -(b & 1), pos + 1)
    z = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return DecodedVarint((z >> 1) ^ -(z & 1), pos)
        shift += 7
        if shift > 63:
            raise VarintTooLongError(f"varint longer than 10 bytes ending at {pos}")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> DecodedVarint:
    """Decode the zig-zag varint at ``buf[pos]``; return ``(value, position after it)``.

    Raises CorruptRecordError when the buffer ends inside the varint or it is longer than a
    varlong (10 bytes).
    """
    try:
        return read_varint(buf, pos)
    except IndexError:
        # The position where the bytes ran out: the end of the buffer once the first byte was read.
        end = pos if not 0 <= pos < len(buf) else len(buf)
        raise CorruptRecordError(f"buffer ends inside a varint at position {end}") from None
