"""The plain-record fast paths (null key, no headers, one timestamp, one value length): the same
bytes as the record-by-record layout of the spec, and decoded back exactly; near misses decode
through the general path."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from headwater.errors import CorruptRecordError
from headwater.records import HEADER_SIZE, crc32c, decode_batch, encode_batch, encode_varint

TS = 1_700_000_000_000


def spec_records(values: list[bytes], ts_deltas: list[int] | None = None) -> bytes:
    """The records section written field by field from the spec (the oracle)."""
    out = bytearray()
    for delta, value in enumerate(values):
        ts_delta = 0 if ts_deltas is None else ts_deltas[delta]
        body = (
            b"\x00"  # attributes
            + encode_varint(ts_delta)
            + encode_varint(delta)
            + encode_varint(-1)  # null key
            + encode_varint(len(value))
            + value
            + b"\x00"  # no headers
        )
        out += encode_varint(len(body)) + body
    return bytes(out)


def reseal(batch: bytes, records: bytes) -> bytes:
    """``batch`` with its records section replaced by ``records`` (length and CRC fixed)."""
    out = bytearray(batch[:HEADER_SIZE] + records)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


# Counts around the offsetDelta varint widths (1 byte < 64 <= 2 bytes < 8192 <= 3 bytes) and value
# lengths around the length varint widths (1 byte < 64 <= 2 bytes < 8192).
@pytest.mark.parametrize(
    ("count", "size"),
    [
        (1, 0),
        (1, 100),
        (63, 1),
        (64, 63),
        (65, 64),
        (200, 127),
        (8193, 100),
        (16_384, 5),
        (3, 8000),
    ],
)
def test_plain_batches_have_the_spec_bytes_and_decode_back(count: int, size: int) -> None:
    values = [bytes([i % 251]) * size for i in range(count)]
    batch = encode_batch(
        [(None, v, ()) for v in values],
        timestamp_ms=TS,
        base_offset=40,
        producer_id=9,
        producer_epoch=1,
        base_sequence=77,
    )
    assert batch[HEADER_SIZE:] == spec_records(values)
    header, records = decode_batch(batch)
    assert header.records_count == count
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (40 + i, TS, None, v, []) for i, v in enumerate(values)
    ]
    assert len({id(r.headers) for r in records}) == count  # each record owns its headers list


def test_mixed_lengths_keys_and_nulls_still_encode_as_the_spec_says() -> None:
    # Not plain: the general encoder writes them; decode gives them back unchanged.
    records = [
        (None, b"a" * 10, ()),
        (None, b"b" * 11, ()),
        (b"k", b"c" * 10, ()),
        (None, None, ()),
    ]
    _header, decoded = decode_batch(encode_batch(records, timestamp_ms=TS))
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (0, None, b"a" * 10),
        (1, None, b"b" * 11),
        (2, b"k", b"c" * 10),
        (3, None, None),
    ]


def test_a_near_plain_section_is_decoded_by_the_general_path() -> None:
    # Same lengths, but the last record has timestampDelta 5: its timestamp must be TS + 5.
    values = [b"x" * 20] * 70
    plain = encode_batch([(None, v, ()) for v in values], timestamp_ms=TS)
    batch = reseal(plain, spec_records(values, [0] * 69 + [5]))
    records = decode_batch(batch)[1]
    assert [r.timestamp for r in records] == [TS] * 69 + [TS + 5]
    assert [r.value for r in records] == values


def test_a_plain_section_with_a_wrong_record_count_is_corrupt() -> None:
    values = [b"y" * 30] * 10
    plain = encode_batch([(None, v, ()) for v in values], timestamp_ms=TS)
    one_more = reseal(plain, spec_records([*values, b"y" * 30]))  # 11 records, count says 10
    with pytest.raises(CorruptRecordError, match="bytes after the last record"):
        decode_batch(one_more)


def test_threads_encoding_plain_batches_at_once_get_the_spec_bytes() -> None:
    # Producer workers encode in parallel and share the per-length tables; a new length (777)
    # makes every thread grow the same table while the others read it.
    value = b"z" * 777
    counts = [50 + 613 * i for i in range(16)]
    results: dict[int, bytes] = {}

    def encode(count: int) -> None:
        results[count] = encode_batch([(None, value, ())] * count, timestamp_ms=TS)[HEADER_SIZE:]

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(encode, counts))
    for count in counts:
        assert results[count] == spec_records([value] * count)


@pytest.mark.parametrize(
    "records", [b"\x80\x01\x00\x00\x00\x01\x80", b"\x0c\x00\x00\x00\x01\x80", b"\x02\x00"]
)
def test_short_records_sections_are_corrupt_not_crashes(records: bytes) -> None:
    batch = reseal(encode_batch([(None, b"v", ())], timestamp_ms=TS), records)
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)
