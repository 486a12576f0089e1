"""Record validation: poison batches with valid CRCs refused, and whatever passes decodes."""

from __future__ import annotations

import os
import struct
from typing import Any

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.errors import CorruptRecordError
from headwater.records import Compression, compress, crc32c, decode_batch, encode_batch
from headwater.records.encoder import RecordTuple
from headwater.records.header import HEADER_SIZE, check_batch
from headwater.records.plain import plain_section
from headwater.records.varint import encode_varint
from headwater_broker.validation.records import validate_records
from headwater_broker.validation.uniform import first_record_end, is_uniform_section

TS = 1_700_000_000_000


def seal(section: bytes, count: int, attributes: int = 0, base_timestamp: int = TS) -> bytes:
    """A batch around ``section`` exactly as given, its header consistent and its CRC valid."""
    head = bytearray(encode_batch([(None, b"x", [])], timestamp_ms=base_timestamp)[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(section))
    struct.pack_into(">hi", head, 21, attributes, count - 1)
    struct.pack_into(">i", head, 57, count)
    batch = head + section
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def record(body: bytes = b"\x00\x00\x00\x01\x02v\x00", offset_delta: int | None = None) -> bytes:
    """A record: its length varint and ``body`` (attributes onwards); ``offset_delta`` rewrites
    the default body's offsetDelta."""
    if offset_delta is not None:
        body = b"\x00\x00" + encode_varint(offset_delta) + b"\x01\x02v\x00"
    return encode_varint(len(body)) + body


def section_of(batch: bytes) -> bytes:
    return batch[HEADER_SIZE:]


def check(batch: bytes) -> None:
    validate_records(batch, 0, check_batch(batch, 0, True))


GOOD_RECORDS = [(b"k", b"v", [("h", b"1"), ("n", None)]), (None, None, []), (b"", b"", [])]


@pytest.mark.parametrize("codec", list(Compression))
def test_valid_batches_pass_in_every_codec(codec: Compression) -> None:
    check(encode_batch(GOOD_RECORDS, compression=codec))
    check(encode_batch([(None, os.urandom(100), [])] * 500, compression=codec))


def test_plain_records_flagged_gzip_are_refused() -> None:
    plain = section_of(encode_batch([(None, b"value", [])] * 3))
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        check(seal(plain, 3, attributes=Compression.GZIP))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_garbage_that_does_not_decompress_is_refused(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        check(seal(b"\x01garbage, not a compressed block" * 3, 1, attributes=codec))


def test_gzip_of_garbage_is_refused() -> None:
    garbage = bytes(cramjam.gzip.compress(os.urandom(64)))
    with pytest.raises(CorruptRecordError):
        check(seal(garbage, 1, attributes=Compression.GZIP))


@pytest.mark.parametrize("field", ["record length", "key length"])
def test_a_varint_longer_than_ten_bytes_is_refused_naming_its_batch(field: str) -> None:
    too_long = b"\xff" * 10 + b"\x01"
    if field == "record length":
        section = too_long + bytes(20)
    else:  # length 20, attributes, timestamp and offset deltas, then the key length
        section = encode_varint(20) + b"\x00\x00\x00" + too_long + bytes(6)
    with pytest.raises(CorruptRecordError, match=r"^record 0 of the batch at position 0: varint"):
        check(seal(section, 1))


def test_a_record_length_of_two_to_the_forty_is_refused() -> None:
    section = encode_varint(1 << 40) + b"\x00\x00\x00\x01\x02v\x00"
    with pytest.raises(CorruptRecordError, match=f"length {1 << 40}"):
        check(seal(section, 1))


@pytest.mark.parametrize("declared", [1, 2, 4, 100])
def test_a_records_count_unlike_the_records_is_refused(declared: int) -> None:
    section = record(offset_delta=0) + record(offset_delta=1) + record(offset_delta=2)
    check(seal(section, 3))
    with pytest.raises(CorruptRecordError, match=f"{declared} (declared )?records"):
        check(seal(section, declared))


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (b"\x01", "headers do not fit"),  # count -1
        (b"\x02\x01\x00", "header key length -1 is null"),  # a null header key
        (b"\x02\x02h\x03", "header value length -2"),
        (b"\x02\x02h\x02", "header value length 1 overruns"),  # a value past the record
        (b"\x0a\x02h\x00", "5 headers do not fit"),
        (b"\x02\x08h\x00", "header key length 4"),
    ],
)
def test_bad_header_framing_is_refused(headers: bytes, reason: str) -> None:
    section = record(b"\x00\x00\x00\x01\x02v" + headers)
    with pytest.raises(CorruptRecordError, match=reason):
        check(seal(section, 1))


@pytest.mark.parametrize(
    ("section", "reason"),
    [
        (record(offset_delta=1), "offset delta 1"),
        (record(b"\x00\x00\x00\x03\x02v\x00"), "key length -2"),
        (record(b"\x00\x00\x00\x01\x05v\x00"), "value length -3"),
        (record(b"\x00\x00\x00\x01\x02v\x00\x00"), "does not match its fields"),
        (record(b"\x00\x00\x00\x01\x02v\x00") + b"\x00", "1 bytes after"),
        (record(b"\x00" + encode_varint((1 << 63) - 1) + b"\x00\x01\x02v\x00"), "leaves int64"),
        (b"\x0a\x00\x00", "length 5"),
        (b"\x0e\x00" + b"\xff" * 11 + b"\x01", "varint longer than 10 bytes"),
    ],
)
def test_malformed_records_are_refused(section: bytes, reason: str) -> None:
    with pytest.raises(CorruptRecordError, match=reason):
        check(seal(section, 1))


def test_plain_sections_are_uniform() -> None:
    for n, count in [(0, 2), (5, 2), (100, 70), (1000, 9), (3, 9000)]:
        values = [os.urandom(n) for _ in range(count)]
        section = plain_section(values)
        assert section is not None
        end = first_record_end(section)
        assert end is not None
        assert is_uniform_section(section, end, count)
        assert not is_uniform_section(section, end, count + 1)
        assert not is_uniform_section(section, end, count - 1)
        assert not is_uniform_section(section + b"\x00", end, count)
        assert not is_uniform_section(section[:-1], end, count)
    # A changed byte of any framing field makes a section not uniform; the walk then decides.
    section = plain_section([b"abc"] * 200) or b""
    for where in (0, 1, 2, 3, 4, 5, 10, 9 * 100 + 3, len(section) - 1):
        changed = bytearray(section)
        changed[where] ^= 2
        assert not is_uniform_section(bytes(changed), first_record_end(section) or 0, 200), where


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=8),
            st.none() | st.binary(max_size=8),
            st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)), max_size=2),
        ),
        min_size=1,
        max_size=4,
    ),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    codec=st.sampled_from([Compression.NONE, Compression.GZIP]),
)
def test_whatever_passes_decodes(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    flips: list[tuple[int, int]],
    codec: Compression,
) -> None:
    """The promise to readers: a damaged section (CRC made valid again) is refused or decodes."""
    section = bytearray(section_of(encode_batch(records)))
    for where, mask in flips:
        section[where % len(section)] ^= mask
    batch = seal(compress(codec, bytes(section)), len(records), attributes=codec)
    try:
        check(batch)
    except CorruptRecordError:
        return
    decoded = decode_batch(batch).records
    assert [r.offset for r in decoded] == list(range(len(records)))


def uniform_records(count: int) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    """Keyed records with one header, all of one layout (fixed-size keys and values)."""
    return [
        (b"key-%04d" % i, b"value-%04d" % i, [("h", b"%03d" % (i % 1000))]) for i in range(count)
    ]


@pytest.mark.parametrize("count", [2, 63, 64, 65, 200, 9000])
def test_uniform_sections_are_recognized_and_pass(count: int) -> None:
    section = section_of(encode_batch(uniform_records(count)))
    end = first_record_end(section)
    assert end is not None
    assert is_uniform_section(section, end, count)
    assert not is_uniform_section(section, end, count - 1)
    assert not is_uniform_section(section + b"\x00", end, count)
    check(encode_batch(uniform_records(count)))
    varied: list[tuple[bytes | None, bytes | None, list[Any]]] = [
        (b"k" * (i % 3), b"v", []) for i in range(count)
    ]
    varied_section = section_of(encode_batch(varied))
    varied_end = first_record_end(varied_section)
    assert varied_end is not None
    assert not is_uniform_section(varied_section, varied_end, count) or count < 2


def test_a_bad_record_among_uniform_ones_is_refused() -> None:
    section = bytearray(section_of(encode_batch(uniform_records(100))))
    start = len(section_of(encode_batch(uniform_records(50))))  # where record 50 begins
    # length | attributes | timestampDelta | offsetDelta 50 | keyLength: made -64
    assert section[start + 3 : start + 5] == encode_varint(50) + encode_varint(8)
    section[start + 4] = 0x7F
    with pytest.raises(CorruptRecordError, match=r"record 50 .* key length -64"):
        check(seal(bytes(section), 100))


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(2, 80),
    flips=st.lists(st.tuples(st.integers(0, 100_000), st.integers(1, 255)), max_size=3),
)
def test_whatever_passes_among_uniform_records_decodes(
    count: int, flips: list[tuple[int, int]]
) -> None:
    section = bytearray(section_of(encode_batch(uniform_records(count))))
    for where, mask in flips:
        section[where % len(section)] ^= mask
    batch = seal(bytes(section), count)
    try:
        check(batch)
    except CorruptRecordError:
        return
    decoded = decode_batch(batch).records
    assert [r.offset for r in decoded] == list(range(count))


def raw_record(
    index: int, ts_delta: int, key: bytes | None, value: bytes | None, headers: list[Any]
) -> bytes:
    """A record built field by field, so timestamp deltas can be anything."""

    def sized(data: bytes | None) -> bytes:
        return encode_varint(-1) if data is None else encode_varint(len(data)) + data

    body = b"\x00" + encode_varint(ts_delta) + encode_varint(index) + sized(key) + sized(value)
    body += encode_varint(len(headers))
    for name, data in headers:
        body += encode_varint(len(name)) + name + sized(data)
    return encode_varint(len(body)) + body


def verdict(batch: bytes, columnar: bool) -> str:
    try:
        validate_records(batch, 0, check_batch(batch, 0, True), columnar=columnar)
    except CorruptRecordError as exc:
        return str(exc)
    return "valid"


@settings(max_examples=400, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.sampled_from([0, 1, -1, 300, -70_000, 1 << 40, (1 << 63) - 1, -(1 << 63)]),
            st.none() | st.binary(max_size=200),
            st.none() | st.binary(max_size=3),
            st.lists(
                st.tuples(st.binary(max_size=3), st.none() | st.binary(max_size=3)), max_size=3
            ),
        ),
        min_size=32,
        max_size=90,
    ),
    base_timestamp=st.sampled_from([TS, 0, -1, (1 << 63) - 1, -(1 << 63)]),
    flips=st.lists(st.tuples(st.integers(0, 100_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 3),
)
def test_the_columnar_check_and_the_walk_agree(
    records: list[tuple[int, bytes | None, bytes | None, list[Any]]],
    base_timestamp: int,
    flips: list[tuple[int, int]],
    cut: int,
) -> None:
    """Valid and damaged sections of records of varying layout get the same verdict, and the
    same message, with and without the numpy check."""
    section = bytearray(b"".join(raw_record(i, *fields) for i, fields in enumerate(records)))
    for where, mask in flips:
        section[where % len(section)] ^= mask
    batch = seal(bytes(section[: len(section) - cut]), len(records), base_timestamp=base_timestamp)
    exact = verdict(batch, columnar=False)
    assert verdict(batch, columnar=True) == exact
    if exact == "valid":
        assert [r.offset for r in decode_batch(batch).records] == list(range(len(records)))


@pytest.mark.parametrize("count", [32, 100, 9000])
def test_varying_layouts_are_proven_valid_column_wise(count: int) -> None:
    from headwater_broker.validation.columnar import section_is_valid

    records: list[tuple[bytes | None, bytes | None, list[Any]]] = [
        (b"k" * (i % 20), os.urandom(i % 300), [("h", b"%d" % i)] * (i % 3)) for i in range(count)
    ]
    section = section_of(encode_batch(records))
    assert section_is_valid(section, count, TS)
    assert not section_is_valid(section, count + 1, TS)
    assert not section_is_valid(section + b"\x00", count, TS)
    check(encode_batch(records))


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_a_section_decompressing_past_the_cap_is_refused(codec: Compression) -> None:
    records: list[RecordTuple] = [(None, os.urandom(100), [])] * 500
    batch = encode_batch(records, compression=codec)
    size = len(section_of(encode_batch(records)))
    validate_records(batch, 0, check_batch(batch, 0, True), max_decompressed=size)
    first = encode_batch([(None, b"v", [])])
    body, pos = first + batch, len(first)
    with pytest.raises(CorruptRecordError) as refused:
        validate_records(body, pos, check_batch(body, pos, True), max_decompressed=size - 1)
    assert str(refused.value) == (
        f"batch at position {pos} decompresses to more than {size - 1} bytes, the cap on one "
        "batch's records"
    )
