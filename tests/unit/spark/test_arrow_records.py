"""The executors' column-wise decode gives the shared codec's records, in Arrow and as bytes."""

from __future__ import annotations

import pytest

from headwater.errors import CorruptRecordError
from headwater.records import Compression, encode_batch, iter_batches, set_log_append_time
from headwater.records.batch import decode_batch, set_base_offset
from headwater.records.decoder import Record
from headwater_spark.arrow_records import decode_fetch

Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def records(count: int, start: int = 0, *, headers: bool = True) -> list[Rec]:
    """Keys, values and headers of every shape: null, empty, short, over one varint byte."""
    out: list[Rec] = []
    for i in range(start, start + count):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 7 == 0 else (b"" if i % 5 == 0 else bytes([i % 256]) * (i * 3))
        hs: list[tuple[str, bytes | None]] = (
            [] if i % 2 or not headers else [("trace", f"t{i}".encode()), ("none", None), ("", b"")]
        )
        out.append((key, value, hs))
    return out


def log_bytes(*, headers: bool = True) -> bytes:
    """Four batches at offsets 100..159: plain, LogAppendTime, gzip-compressed, and one with
    timestamps far from the base (multi-byte varlong deltas)."""
    first = bytearray(
        encode_batch(
            records(15, headers=headers), timestamps=[1_700_000_000_000 + i for i in range(15)]
        )
    )
    set_base_offset(first, 0, 100)
    second = bytearray(
        encode_batch(records(15, 15, headers=headers), timestamp_ms=1_700_000_100_000)
    )
    set_base_offset(second, 0, 115)
    set_log_append_time(second, 0, 1_700_000_200_000)
    third = bytearray(
        encode_batch(
            records(10, 30, headers=headers),
            timestamp_ms=1_700_000_300_000,
            compression=Compression.GZIP,
        )
    )
    set_base_offset(third, 0, 130)
    fourth = bytearray(
        encode_batch(
            records(20, 40, headers=headers),
            timestamps=[1_000 + i * 10**11 for i in range(20)],
        )
    )
    set_base_offset(fourth, 0, 140)
    return bytes(first + second + third + fourth)


def reference(buf: bytes, low: int, high: int) -> list[Record]:
    """The shared codec's records (the reference) with ``low <= offset < high``."""
    out: list[Record] = []
    for pos, _header in iter_batches(buf, verify_crc=True):
        out.extend(r for r in decode_batch(buf, pos)[1] if low <= r.offset < high)
    return out


@pytest.mark.parametrize("headers", [True, False])
@pytest.mark.parametrize(("low", "high"), [(0, 1000), (100, 160), (103, 137), (115, 116), (0, 0)])
def test_columns_equal_the_reference_codec(low: int, high: int, headers: bool) -> None:
    buf = log_bytes(headers=headers)
    want = reference(buf, low, high)
    offsets = [r.offset for r in want]
    timestamps = [r.timestamp for r in want]
    # LogAppendTime: the second batch (offsets 115..129).
    types = [1 if 115 <= r.offset < 130 else 0 for r in want]
    keys, values = [r.key for r in want], [r.value for r in want]
    record_headers = [r.headers for r in want]
    got = decode_fetch(buf, list(iter_batches(buf)), low, high)
    assert got.offsets.tolist() == offsets == [i for i in range(100, 160) if low <= i < high]
    assert got.timestamps.tolist() == timestamps
    assert got.timestamp_types.tolist() == types
    assert got.key_list() == keys
    assert got.value_list() == values
    assert (got.headers or [[] for _ in want]) == record_headers
    columns = got.arrow()
    assert columns["offset"].to_pylist() == offsets
    assert columns["value"].to_pylist() == values
    assert columns["key"].to_pylist() == keys
    assert columns["timestamp"].to_pylist() == timestamps
    assert columns["timestampType"].to_pylist() == types
    assert [[(h["key"], h["value"]) for h in row] for row in columns["headers"].to_pylist()] == (
        record_headers
    )
    assert "headers" not in got.arrow(headers=False)


def test_lean_decode_fills_offsets_and_values_and_slices() -> None:
    buf = log_bytes()
    lean = decode_fetch(buf, list(iter_batches(buf)), 110, 135, lean=True)
    assert lean.offsets.tolist() == list(range(110, 135))
    assert lean.value_list() == [r[1] for r in records(40)[10:35]]
    assert len(lean.timestamps) == len(lean.key_lengths) == 0
    part = lean.slice(5, 12)
    assert part.offsets.tolist() == list(range(115, 122))
    assert part.value_list() == [r[1] for r in records(40)[15:22]]
    assert part.arrow()["value"].to_pylist() == part.value_list()


def test_a_record_length_that_overruns_its_batch_is_corrupt() -> None:
    batch = bytearray(encode_batch([(None, b"abc", [])] * 3))
    placed = list(iter_batches(bytes(batch)))
    batch[61] = 0x7E  # the first record claims 63 bytes: past the batch (CRC checked before)
    with pytest.raises(CorruptRecordError):
        decode_fetch(bytes(batch), placed, 0, 10)
