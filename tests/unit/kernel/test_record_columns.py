"""The column-wise record reader agrees with the scalar grammar, and gives up where it should."""

from __future__ import annotations

import random

import numpy as np
import pytest

from headwater.records import encode_batch
from headwater.records.decoder import decode_batch
from headwater.records.grammar import read_headers, record_heads
from headwater.records.header import HEADER_SIZE
from headwater.records.varint import encode_varint
from headwater_kernel.record_columns import VARLONG_BYTES, record_columns, varints


def _section(batch: bytes) -> bytes:
    return batch[HEADER_SIZE:]


def test_columns_equal_the_scalar_decoders_fields() -> None:
    rng = random.Random(7)
    records = [
        (
            None if i % 5 == 0 else rng.randbytes(rng.randrange(0, 300)),
            None if i % 7 == 0 else rng.randbytes(rng.randrange(0, 9000)),
            [("h", rng.randbytes(3)), ("k", None)] if i % 3 == 0 else [],
        )
        for i in range(60)
    ]
    timestamps = [1_700_000_000_000 - 10_000_000 * i for i in range(60)]  # negative deltas
    batch = encode_batch(records, timestamps=timestamps)
    section = _section(batch)
    heads: list[int] = []
    assert record_heads(section, 0, len(section), len(records), heads)
    columns = record_columns(np.frombuffer(section, np.uint8), np.array(heads, np.int64))
    assert columns is not None
    assert columns.well_framed().all()
    decoded = decode_batch(batch).records
    base = decoded[0].timestamp
    assert (columns.timestamp_deltas + base).tolist() == [r.timestamp for r in decoded]
    assert columns.offset_deltas.tolist() == list(range(60))
    for i, record in enumerate(decoded):
        key_at, key_length = int(columns.key_starts[i]), int(columns.key_lengths[i])
        assert (None if key_length < 0 else section[key_at : key_at + key_length]) == record.key
        at, length = int(columns.value_starts[i]), int(columns.value_lengths[i])
        assert (None if length < 0 else section[at : at + length]) == record.value
        count = int(columns.header_counts[i])
        assert read_headers(section, int(columns.headers_at[i]), count) == record.headers
    assert columns.ends.tolist() == [*heads[1:], len(section)]


@pytest.mark.parametrize(
    "value", [0, -1, 63, -64, 1 << 40, -(1 << 62) - 5, (1 << 63) - 1, -(1 << 63)]
)
def test_varlongs_decode_across_the_whole_int64_range(value: int) -> None:
    data = encode_varint(value) + b"\x00"
    u = np.frombuffer(data, np.uint8)
    read = varints(u, np.array([0]), np.array([len(data)]), VARLONG_BYTES)
    assert read is not None
    assert read[0].tolist() == [value]
    assert read[1].tolist() == [len(data) - 1]


def test_a_varint_past_its_bound_or_too_long_is_not_read() -> None:
    data = encode_varint(1 << 20)  # three bytes
    u = np.frombuffer(data, np.uint8)
    assert varints(u, np.array([0]), np.array([2]), 5) is None  # runs past its record
    assert varints(u, np.array([0]), np.array([3]), 2) is None  # longer than the field allows


def test_lengths_that_do_not_frame_the_section_are_refused() -> None:
    section = _section(encode_batch([(None, b"v", [])] * 3))
    assert not record_heads(section, 0, len(section), 4, [])  # fewer records than declared
    assert not record_heads(section + b"\x00", 0, len(section) + 1, 3, [])  # bytes after them
    assert not record_heads(b"\x01" + section[1:], 0, len(section), 3, [])  # a negative length
