"""RecordBatch v2: exact bytes, round trips through every codec, and corrupt input rejected."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.errors import CorruptRecordError
from headwater.records import (
    HEADER_SIZE,
    Compression,
    Record,
    TimestampType,
    crc32c,
    decode_batch,
    decode_batches,
    encode_batch,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    valid_prefix,
)

TS = 1_700_000_000_000  # 0x0000018BCFE56800

# One record, key b"k", value b"v", no headers, base offset 0, no producer, derived from the spec:
#   record: length 8 -> 10 | attributes 00 | tsDelta 0 -> 00 | offsetDelta 0 -> 00 |
#           keyLen 1 -> 02 | 6b | valueLen 1 -> 02 | 76 | headers 0 -> 00
#   batchLength = 49 + 9 record bytes = 58 = 0x3a
#   crc = CRC-32C of attributes..end (cross-checked below against the crc32c vector function)
EXPECTED_TINY = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000003a"  # batchLength 58
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "e99b8dd8"  # crc
    "0000"  # attributes: no codec, CreateTime
    "00000000"  # lastOffsetDelta 0
    "0000018bcfe56800"  # baseTimestamp
    "0000018bcfe56800"  # maxTimestamp
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000001"  # recordsCount 1
    "10"
    "00"
    "00"
    "00"
    "02"
    "6b"
    "02"
    "76"
    "00"  # the record
)


def test_tiny_batch_has_the_exact_bytes_of_the_spec() -> None:
    encoded = encode_batch([(b"k", b"v", [])], timestamp_ms=TS)
    assert encoded == EXPECTED_TINY
    assert crc32c(EXPECTED_TINY[21:]) == 0xE99B8DD8


def test_tiny_batch_decodes_back() -> None:
    header, records = decode_batch(EXPECTED_TINY)
    assert records == [Record(offset=0, timestamp=TS, key=b"k", value=b"v", headers=[])]
    assert (header.base_offset, header.batch_length, header.size) == (0, 58, 70)
    assert (header.magic, header.crc, header.records_count, header.last_offset) == (
        2,
        0xE99B8DD8,
        1,
        0,
    )
    assert header.compression is Compression.NONE
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.producer_id, header.producer_epoch, header.last_sequence) == (-1, -1, -1)
    assert not header.is_transactional
    assert not header.is_control


def test_header_fields_of_an_idempotent_batch() -> None:
    batch = encode_batch(
        [(b"a", b"1", []), (None, b"2", [("h", b"x")]), (b"c", None, [])],
        base_offset=40,
        producer_id=9,
        producer_epoch=2,
        base_sequence=2**31 - 2,
        timestamps=[TS + 5, TS, TS + 9],
        partition_leader_epoch=3,
        is_transactional=True,
    )
    header = parse_header(batch)
    assert (header.base_offset, header.last_offset_delta, header.last_offset) == (40, 2, 42)
    assert (header.base_timestamp, header.max_timestamp) == (TS + 5, TS + 9)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 2**31 - 2)
    assert header.last_sequence == 0  # wraps past int32 max like Kafka's
    assert header.partition_leader_epoch == 3
    assert header.is_transactional
    _, records = decode_batch(batch)
    assert records == [
        Record(40, TS + 5, b"a", b"1", []),
        Record(41, TS, None, b"2", [("h", b"x")]),
        Record(42, TS + 9, b"c", None, []),
    ]


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trips(codec: Compression) -> None:
    records = [
        (f"key-{i}".encode(), (b"value %d " % i) * (i % 50), [("trace", b"%d" % i), ("n", None)])
        for i in range(300)
    ]
    batch = encode_batch(records, compression=codec, timestamp_ms=TS, base_offset=1000)
    header, decoded = decode_batch(batch)
    assert header.compression is codec
    assert [(r.key, r.value, r.headers) for r in decoded] == [
        (k, v, list(h)) for k, v, h in records
    ]
    assert [r.offset for r in decoded] == list(range(1000, 1300))
    if codec is not Compression.NONE:
        assert len(batch) < len(encode_batch(records, timestamp_ms=TS)) // 2


def test_snappy_is_written_in_xerial_framing_and_raw_snappy_is_read() -> None:
    import cramjam

    from headwater.records.compression import compress, decompress

    data = b"headwater " * 10_000  # more than one 32 KiB xerial block
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first_chunk,) = struct.unpack(">i", framed[16:20])
    assert 20 + first_chunk < len(framed)  # a second chunk follows
    assert decompress(Compression.SNAPPY, framed) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, raw) == data


def test_large_values_use_multibyte_lengths() -> None:
    value = bytes(range(256)) * 100  # 25,600 bytes: beyond the small-varint table
    batch = encode_batch([(None, value, []), (b"k" * 20_000, b"", [])], timestamp_ms=TS)
    _, records = decode_batch(batch)
    assert records[0].value == value
    assert records[1].key == b"k" * 20_000
    assert records[1].value == b""


def test_decode_batches_over_concatenated_batches() -> None:
    first = encode_batch([(None, b"a", []), (None, b"b", [])], base_offset=0, timestamp_ms=TS)
    second = encode_batch(
        [(None, b"c", [])], base_offset=2, compression=Compression.LZ4, timestamp_ms=TS
    )
    assert [(r.offset, r.value) for r in decode_batches(first + second)] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
    ]
    assert [(p, h.base_offset) for p, h in iter_batches(first + second)] == [
        (0, 0),
        (len(first), 2),
    ]


def test_set_base_offset_keeps_the_crc_valid() -> None:
    buf = bytearray(EXPECTED_TINY)
    set_base_offset(buf, 0, 123456)
    header, records = decode_batch(buf)
    assert header.base_offset == 123456
    assert header.crc == 0xE99B8DD8
    assert records[0].offset == 123456


def test_set_log_append_time_sets_the_bit_max_timestamp_and_crc() -> None:
    batch = encode_batch([(None, b"a", []), (None, b"b", [])], timestamp_ms=TS)
    buf = bytearray(b"x" * 5 + batch)
    set_log_append_time(buf, 5, TS + 777)
    header, records = decode_batch(buf, 5)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == TS + 777
    assert header.crc == crc32c(bytes(buf[5 + 21 :]))
    assert [r.timestamp for r in records] == [TS + 777, TS + 777]


def _with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:60], "truncated batch header at position 0: 60 of 61"),
        (lambda b: b[:-1], "truncated batch at position 0: 70 bytes declared, 69 present"),
        (lambda b: b[:16] + b"\x01" + b[17:], "unsupported magic 1"),
        (lambda b: b[:8] + struct.pack(">i", 48) + b[12:], "batch length 48 at position 0"),
        (lambda b: b[:-2] + b"\x03\x00", "CRC mismatch in batch at position 0"),
        (lambda b: b[:17] + b"\x00\x00\x00\x00" + b[21:], "stored 0x00000000"),
        (
            lambda b: _with_crc(bytearray(b[:57] + struct.pack(">i", -1) + b[61:])),
            "negative records count -1",
        ),
        (
            lambda b: _with_crc(bytearray(b[:23] + struct.pack(">i", -3) + b[27:])),
            "negative last offset delta -3",
        ),
        (
            lambda b: _with_crc(bytearray(b[:21] + struct.pack(">h", 5) + b[23:])),
            "unknown compression codec 5",
        ),
        (
            lambda b: _with_crc(bytearray(b[:57] + struct.pack(">i", 2) + b[61:])),
            "below records count - 1",
        ),
    ],
)
def test_corrupt_batches_are_rejected_precisely(mutate: object, message: str) -> None:
    assert callable(mutate)
    bad = mutate(EXPECTED_TINY)
    with pytest.raises(CorruptRecordError, match=message.replace("(", r"\(")):
        list(iter_batches(bad))
    with pytest.raises(CorruptRecordError):
        decode_batch(bad)


def test_record_fields_that_overrun_the_batch_are_corrupt() -> None:
    # The record claims key length 63 (7e) inside a 9-byte records section; the CRC is valid.
    buf = bytearray(EXPECTED_TINY)
    buf[HEADER_SIZE + 4] = 0x7E
    with pytest.raises(CorruptRecordError, match="records of batch at 0 end early"):
        decode_batch(_with_crc(buf))


def test_corrupt_compressed_body_is_a_corrupt_record() -> None:
    batch = bytearray(encode_batch([(None, b"x" * 100, [])], compression=Compression.ZSTD))
    batch[HEADER_SIZE + 2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="zstd"):
        decode_batch(_with_crc(batch))


def test_empty_record_list_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])


def test_valid_prefix_of_good_and_garbage_tails() -> None:
    a = encode_batch([(None, b"a", [])], timestamp_ms=TS)
    b = encode_batch([(None, b"bb", [])], timestamp_ms=TS, base_offset=1)
    assert valid_prefix(a + b)[0] == len(a) + len(b)
    length, headers = valid_prefix(a + b + b"\x00garbage")
    assert length == len(a) + len(b)
    assert [(p, h.base_offset) for p, h in headers] == [(0, 0), (len(a), 1)]
    assert valid_prefix(b"")[0] == 0
    assert valid_prefix(b"\xff" * 100) == (0, [])


_records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    records=_records,
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    timestamp=st.integers(min_value=0, max_value=2**50),
)
def test_random_batches_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Compression,
    base_offset: int,
    timestamp: int,
) -> None:
    batch = encode_batch(
        records, compression=codec, base_offset=base_offset, timestamp_ms=timestamp
    )
    header, decoded = decode_batch(batch)
    assert header.records_count == len(records)
    assert [(r.key, r.value, r.headers) for r in decoded] == [
        (k, v, list(h)) for k, v, h in records
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert {r.timestamp for r in decoded} == {timestamp}


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=6),
    codec=st.sampled_from(list(Compression)),
    data=st.data(),
)
def test_valid_prefix_of_a_cut_stream_is_the_whole_batches_before_the_cut(
    sizes: list[int], codec: Compression, data: st.DataObject
) -> None:
    batches = [
        encode_batch([(None, b"v%d" % j, []) for j in range(n)], compression=codec) for n in sizes
    ]
    stream = b"".join(batches)
    cut = data.draw(st.integers(min_value=0, max_value=len(stream)))
    ends = []
    total = 0
    for batch in batches:
        total += len(batch)
        ends.append(total)
    whole = [end for end in ends if end <= cut]
    length, headers = valid_prefix(stream[:cut])
    assert length == (whole[-1] if whole else 0)
    assert len(headers) == len(whole)


def test_batches_beyond_the_small_varint_table_round_trip() -> None:
    # Offset deltas past 16383 take the general varint path.
    records = [
        (None if i % 3 else b"k%d" % i, b"%d" % i, [("h", b"x")] if i % 5 == 0 else [])
        for i in range(20_000)
    ]
    header, decoded = decode_batch(encode_batch(records, timestamp_ms=TS, base_offset=7))
    assert header.last_offset_delta == 19_999
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded] == [
        (7 + i, k, v, list(h)) for i, (k, v, h) in enumerate(records)
    ]


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codecs_are_corrupt_records(codec: int) -> None:
    from headwater.records import compress, decompress

    with pytest.raises(CorruptRecordError, match=f"unknown compression codec {codec}"):
        compress(codec, b"data")
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec {codec}"):
        decompress(codec, b"data")


def test_truncated_xerial_snappy_is_corrupt() -> None:
    from headwater.records import compress, decompress

    framed = compress(Compression.SNAPPY, b"abc" * 1000)
    with pytest.raises(CorruptRecordError, match="snappy: truncated xerial chunk"):
        decompress(Compression.SNAPPY, framed[:-3])


def test_decode_batch_as_builds_the_callers_records() -> None:
    from headwater.records import decode_batch_as

    def as_tuple(
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> tuple[int, int, bytes | None, bytes | None, int]:
        return offset, timestamp, key, value, len(headers)

    header, rows = decode_batch_as(EXPECTED_TINY, 0, as_tuple)
    assert header.records_count == 1
    assert rows == [(0, TS, b"k", b"v", 0)]
