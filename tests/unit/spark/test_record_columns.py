"""The executors' batch decode: aiokafka's compiled reader gives the shared codec's columns."""

from __future__ import annotations

import pytest

from headwater.records import Compression, encode_batch, iter_batches, set_log_append_time
from headwater.records.batch import set_base_offset
from headwater_spark.record_columns import COMPILED, RecordColumns, append_batch

Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]

pytestmark = pytest.mark.skipif(not COMPILED, reason="aiokafka's compiled reader not installed")


def records(count: int, start: int = 0) -> list[Rec]:
    """Keys, values and headers of every shape: null, empty, short, over one varint byte."""
    out: list[Rec] = []
    for i in range(start, start + count):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 7 == 0 else (b"" if i % 5 == 0 else bytes([i % 256]) * (i * 3))
        headers: list[tuple[str, bytes | None]] = (
            [] if i % 2 else [("trace", f"t{i}".encode()), ("none", None), ("", b"")]
        )
        out.append((key, value, headers))
    return out


def log_bytes() -> bytes:
    """Three batches at offsets 100..139: plain, LogAppendTime, and gzip-compressed."""
    first = bytearray(
        encode_batch(records(15), timestamps=[1_700_000_000_000 + i for i in range(15)])
    )
    set_base_offset(first, 0, 100)
    second = bytearray(encode_batch(records(15, 15), timestamp_ms=1_700_000_100_000))
    set_base_offset(second, 0, 115)
    set_log_append_time(second, 0, 1_700_000_200_000)
    third = bytearray(
        encode_batch(records(10, 30), timestamp_ms=1_700_000_300_000, compression=Compression.GZIP)
    )
    set_base_offset(third, 0, 130)
    return bytes(first + second + third)


def decode(buf: bytes, low: int, high: int, *, lean: bool, compiled: bool) -> RecordColumns:
    out = RecordColumns()
    for pos, header in iter_batches(buf, verify_crc=True):
        append_batch(out, buf, pos, header, low, high, lean=lean, compiled=compiled)
    return out


@pytest.mark.parametrize(("low", "high"), [(0, 1000), (100, 140), (103, 137), (115, 116)])
def test_compiled_and_reference_decoders_give_equal_columns(low: int, high: int) -> None:
    buf = log_bytes()
    reference = decode(buf, low, high, lean=False, compiled=False)
    compiled = decode(buf, low, high, lean=False, compiled=True)
    assert compiled == reference
    kept = [i for i in range(100, 140) if low <= i < high]
    assert reference.offsets == kept
    assert reference.keys == [records(40)[i - 100][0] for i in kept]
    assert reference.values == [records(40)[i - 100][1] for i in kept]
    assert reference.headers == [records(40)[i - 100][2] for i in kept]
    # Record timestamps; LogAppendTime batches report the append time for every record.
    want_ts = [
        1_700_000_000_000 + i - 100
        if i < 115
        else (1_700_000_200_000 if i < 130 else 1_700_000_300_000)
        for i in kept
    ]
    assert reference.timestamps == want_ts


def test_lean_read_fills_only_offsets_and_values() -> None:
    buf = log_bytes()
    for compiled in (False, True):
        lean = decode(buf, 110, 135, lean=True, compiled=compiled)
        assert lean.offsets == list(range(110, 135))
        assert lean.values == [r[1] for r in records(40)[10:35]]
        assert lean.timestamps == []
        assert lean.keys == []
        assert lean.headers == []


def test_take_splits_off_the_first_records() -> None:
    columns = decode(log_bytes(), 0, 1000, lean=False, compiled=True)
    head = columns.take(12)
    assert head.offsets == list(range(100, 112))
    assert len(head.headers) == len(head.keys) == 12
    assert columns.offsets == list(range(112, 140))
    assert len(columns) == 28
