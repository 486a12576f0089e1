"""Offset options, range splitting and per-trigger limits of the Spark source (pure planning)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.types import Offset, PartitionId
from headwater_spark.offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetOptionError,
    OffsetRange,
    OffsetSpec,
    check_order,
    from_json_offsets,
    limit_ends,
    parse_offset_spec,
    parse_timestamp_spec,
    resolve_ends,
    resolve_starts,
    split_ranges,
    to_json_offsets,
)


def tp(topic: str, p: int) -> tuple[str, PartitionId]:
    return (topic, PartitionId(p))


def r(p: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, PartitionId(p), Offset(start), Offset(end))


RANGES = {tp("t", 0): (Offset(5), Offset(9)), tp("t", 1): (Offset(0), Offset(3))}


def no_timestamps(_tp: tuple[str, PartitionId], _ts: int) -> Offset | None:
    return None


def starts(text: str | None, *, batch: bool = True, loss: bool = True) -> dict[object, int]:
    spec = parse_offset_spec(text, EARLIEST if batch else LATEST)
    return dict(resolve_starts(spec, RANGES, no_timestamps, batch=batch, fail_on_data_loss=loss))


def ends(text: str | None, *, loss: bool = True) -> dict[object, int]:
    spec = parse_offset_spec(text, LATEST)
    return dict(resolve_ends(spec, RANGES, no_timestamps, fail_on_data_loss=loss))


def test_words_and_json_offsets_resolve_against_the_log_range() -> None:
    assert starts("earliest") == {tp("t", 0): 5, tp("t", 1): 0}
    assert starts(None) == {tp("t", 0): 5, tp("t", 1): 0}
    assert starts("LATEST", batch=False) == {tp("t", 0): 9, tp("t", 1): 3}
    assert starts('{"t": {"0": 7, "1": -2}}') == {tp("t", 0): 7, tp("t", 1): 0}
    assert starts('{"t": {"0": -1, "1": 2}}', batch=False) == {tp("t", 0): 9, tp("t", 1): 2}
    assert ends(None) == {tp("t", 0): 9, tp("t", 1): 3}
    assert ends('{"t": {"0": 6, "1": -1}}') == {tp("t", 0): 6, tp("t", 1): 3}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # Kafka's rules: latest cannot start a batch, earliest cannot end one.
        (lambda: starts("latest"), "startingOffsets=latest is not valid for batch"),
        (lambda: starts('{"t": {"0": -1, "1": 0}}'), "-1 (latest) for t/0 is not valid"),
        (lambda: ends("earliest"), "endingOffsets=earliest is not valid"),
        (lambda: ends('{"t": {"0": -2, "1": -1}}'), "-2 (earliest) for t/0 is not valid"),
        # Every partition read is named, and only those.
        (lambda: starts('{"t": {"0": 5}}'), "missing ['t/1']"),
        (lambda: ends('{"t": {"0": 6, "1": 3, "7": 0}}'), "not read by this query ['t/7']"),
        # Past the end: refused, not clamped.
        (lambda: starts('{"t": {"0": 100, "1": 0}}'), "offset 100 of t/0 is past the log end 9"),
        (lambda: ends('{"t": {"0": 1000, "1": 3}}'), "offset 1000 of t/0 is past the log end 9"),
    ],
)
def test_offsets_kafka_refuses_are_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(OffsetOptionError, match=re.escape(message)):
        call()


def test_offsets_before_the_log_start_are_data_loss_unless_allowed() -> None:
    with pytest.raises(DataLossError, match=r"offset 2 of t/0 is before the log start 5"):
        starts('{"t": {"0": 2, "1": 0}}')
    assert starts('{"t": {"0": 2, "1": 0}}', loss=False) == {tp("t", 0): 5, tp("t", 1): 0}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        ends('{"t": {"0": 3, "1": 3}}')
    assert ends('{"t": {"0": 3, "1": 3}}', loss=False) == {tp("t", 0): 5, tp("t", 1): 3}


def test_starting_timestamps_use_the_lookup_and_its_strategy() -> None:
    found = {tp("t", 0): Offset(7)}  # t/1 has no record at or after the timestamp

    def lookup(p: tuple[str, PartitionId], ts: int) -> Offset | None:
        assert ts == 1_700_000_000_000
        return found.get(p)

    spec = OffsetSpec("timestamps", timestamp=1_700_000_000_000)
    with pytest.raises(OffsetOptionError, match="t/1 has no record at or after timestamp"):
        resolve_starts(spec, RANGES, lookup, batch=True, fail_on_data_loss=True)
    assert resolve_starts(
        spec, RANGES, lookup, batch=True, fail_on_data_loss=True, timestamp_strategy="latest"
    ) == {tp("t", 0): 7, tp("t", 1): 3}
    # An ending timestamp with no record after it reads to the end.
    assert resolve_ends(spec, RANGES, lookup, fail_on_data_loss=True) == {
        tp("t", 0): 7,
        tp("t", 1): 3,
    }
    by_partition = parse_timestamp_spec(
        '{"t": {"0": 1700000000000, "1": 1700000000000}}', "startingOffsetsByTimestamp"
    )
    assert by_partition.per_partition == {
        tp("t", 0): 1_700_000_000_000,
        tp("t", 1): 1_700_000_000_000,
    }


def test_a_start_after_its_end_is_refused() -> None:
    with pytest.raises(
        OffsetOptionError, match="starting offset 8 of t/0 is after its ending offset 6"
    ):
        check_order({tp("t", 0): Offset(8)}, {tp("t", 0): Offset(6)})


@pytest.mark.parametrize(
    "text",
    ["soonest", '{"t": 5}', '{"t": {"x": 1}}', '{"t": {"0": -3}}', '{"t": {"0": "1"}}', "[1]"],
)
def test_malformed_offsets_are_rejected(text: str) -> None:
    with pytest.raises(OffsetOptionError, match="option offsets"):
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
