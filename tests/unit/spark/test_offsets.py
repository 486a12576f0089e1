"""Offset options, range splitting and per-trigger limits of the Spark source (pure planning)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.types import Offset, PartitionId
from headwater_spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    from_json_offsets,
    limit_ends,
    parse_offset_spec,
    split_ranges,
    to_json_offsets,
)


def tp(topic: str, p: int) -> tuple[str, PartitionId]:
    return (topic, PartitionId(p))


def r(p: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, PartitionId(p), Offset(start), Offset(end))


def test_words_and_json_offsets_resolve_against_the_log_range() -> None:
    assert parse_offset_spec("earliest", LATEST).resolve(tp("t", 0), Offset(5), Offset(9)) == 5
    assert parse_offset_spec("LATEST", EARLIEST).resolve(tp("t", 0), Offset(5), Offset(9)) == 9
    assert parse_offset_spec(None, EARLIEST).resolve(tp("t", 0), Offset(5), Offset(9)) == 5
    spec = parse_offset_spec('{"t": {"0": 7, "1": -2, "2": -1, "3": 100, "4": 0}}', LATEST)
    assert spec.resolve(tp("t", 0), Offset(5), Offset(9)) == 7
    assert spec.resolve(tp("t", 1), Offset(5), Offset(9)) == 5
    assert spec.resolve(tp("t", 2), Offset(5), Offset(9)) == 9
    assert spec.resolve(tp("t", 3), Offset(5), Offset(9)) == 9  # clamped to the end
    assert spec.resolve(tp("t", 4), Offset(5), Offset(9)) == 5  # clamped to the beginning
    assert spec.resolve(tp("t", 9), Offset(5), Offset(9)) == 9  # unnamed: the default


@pytest.mark.parametrize(
    "text",
    ["soonest", '{"t": 5}', '{"t": {"x": 1}}', '{"t": {"0": -3}}', '{"t": {"0": "1"}}', "[1]"],
)
def test_malformed_offsets_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="offset"):
        parse_offset_spec(text, EARLIEST)


def test_checkpoint_json_round_trips_with_string_partition_keys() -> None:
    offsets = {tp("b", 1): Offset(3), tp("a", 0): Offset(10), tp("a", 10): Offset(2)}
    as_json = to_json_offsets(offsets)
    assert as_json == {"a": {"0": 10, "10": 2}, "b": {"1": 3}}
    assert from_json_offsets(as_json) == offsets


def test_large_ranges_split_evenly_and_empty_ones_vanish() -> None:
    pieces = split_ranges([r(0, 0, 10), r(1, 5, 5), r(2, 100, 103)], max_records=4)
    assert pieces == [r(0, 0, 4), r(0, 4, 7), r(0, 7, 10), r(2, 100, 103)]


def test_min_splits_halves_the_largest_piece() -> None:
    assert split_ranges([r(0, 0, 8), r(1, 0, 2)], max_records=100, min_splits=4) == [
        r(0, 0, 2),
        r(0, 2, 4),
        r(0, 4, 8),
        r(1, 0, 2),
    ]
    # A single record cannot be split further.
    assert split_ranges([r(0, 0, 1)], max_records=100, min_splits=3) == [r(0, 0, 1)]


@given(
    sizes=st.lists(st.integers(0, 500), min_size=1, max_size=6),
    max_records=st.integers(1, 200),
    min_splits=st.integers(1, 12),
)
def test_split_pieces_cover_each_range_exactly(
    sizes: list[int], max_records: int, min_splits: int
) -> None:
    ranges = [r(p, 10 * p, 10 * p + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, max_records, min_splits)
    for original in ranges:
        mine = [piece for piece in pieces if piece.partition == original.partition]
        covered = [o for piece in mine for o in range(piece.start, piece.end)]
        assert covered == list(range(original.start, original.end))
        assert all(piece.size <= max_records for piece in mine)
    total = sum(size for size in sizes)
    assert len(pieces) >= min(min_splits, total)


def test_trigger_limit_shares_the_budget_fairly() -> None:
    start = {tp("t", 0): Offset(0), tp("t", 1): Offset(100), tp("t", 2): Offset(0)}
    available = {tp("t", 0): Offset(2), tp("t", 1): Offset(200), tp("t", 2): Offset(50)}
    # Partition 0 has only 2 pending; the other 8 are split between partitions 1 and 2.
    assert limit_ends(start, available, 10) == {
        tp("t", 0): Offset(2),
        tp("t", 1): Offset(104),
        tp("t", 2): Offset(4),
    }
    # Enough budget for everything: read everything.
    assert limit_ends(start, available, 1000) == available
    # A budget smaller than the partition count: the lowest partitions get the remainder.
    assert limit_ends(start, available, 1) == {
        tp("t", 0): Offset(1),
        tp("t", 1): Offset(100),
        tp("t", 2): Offset(0),
    }


@given(
    pending=st.lists(st.integers(0, 300), min_size=1, max_size=8),
    budget=st.integers(1, 1000),
)
def test_trigger_limit_never_exceeds_budget_or_availability(
    pending: list[int], budget: int
) -> None:
    start = {tp("t", p): Offset(7) for p in range(len(pending))}
    available = {tp("t", p): Offset(7 + n) for p, n in enumerate(pending)}
    ends = limit_ends(start, available, budget)
    read = [ends[k] - start[k] for k in start]
    assert all(0 <= n <= pending[i] for i, n in enumerate(read))
    assert sum(read) == min(budget, sum(pending))
