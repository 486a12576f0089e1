"""Zig-zag varints and CRC-32C against known vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.errors import CorruptRecordError
from headwater.records import crc32c, decode_varint, encode_varint


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (300, "d804"),
        (8191, "fe7f"),
        (8192, "808001"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
        (2**63 - 1, "feffffffffffffffff01"),
        (-(2**63), "ffffffffffffffffff01"),
    ],
)
def test_varint_vectors(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


def test_decode_varint_from_the_middle_of_a_buffer() -> None:
    buf = b"\xaa" + bytes.fromhex("d804") + b"\x7f"
    assert decode_varint(buf, 1) == (300, 3)
    assert decode_varint(buf, 3) == (-64, 4)


def test_truncated_and_overlong_varints_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="inside a varint"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 11 + b"\x01", 0)


def test_values_beyond_a_varlong_are_refused() -> None:
    with pytest.raises(ValueError, match="varlong"):
        encode_varint(2**63)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(b"\x00" + encoded, 1) == (value, 1 + len(encoded))


def test_crc32c_vectors() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
    assert crc32c(b"\xff" * 32) == 0x62A8AB43  # RFC 3720 B.4: 32 bytes of ones


def test_crc32c_continues_from_a_previous_value() -> None:
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283
    assert crc32c(memoryview(b"123456789")) == crc32c(bytearray(b"123456789"))
