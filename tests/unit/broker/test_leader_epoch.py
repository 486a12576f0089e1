"""LeaderEpochCache: Kafka's LeaderEpochFileCache rules, and its checkpoint file on disk."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater_broker.log.leader_epoch import (
    CHECKPOINT_FILE,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    CorruptCheckpointError,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
    format_checkpoint,
    parse_checkpoint,
)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_assign_keeps_epochs_and_offsets_ascending(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 25))
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(2, 25)]
    # The same epoch again from a later offset changes nothing.
    assert not cache.assign(2, 30)
    assert cache.latest_epoch == 2
    # An undefined epoch (batches from before epochs) is ignored.
    assert not cache.assign(-1, 40)
    # A new epoch at an offset below later entries replaces them (that tail is gone).
    assert cache.assign(3, 12)
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(3, 12)]
    # An older epoch than the latest replaces every entry at or after it.
    assert cache.assign(1, 11)
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(1, 11)]


def test_an_epoch_that_wrote_nothing_is_replaced_by_the_next_at_the_same_offset(
    tmp_path: Path,
) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 10))
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 10)]


def test_end_offset_for_follows_kip_101_and_279(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    leo = 40
    # The latest epoch ends at the log end.
    assert cache.end_offset_for(6, leo) == EpochEndOffset(6, 40)
    # A known older epoch ends where the next one starts.
    assert cache.end_offset_for(3, leo) == EpochEndOffset(3, 25)
    # An unknown epoch between two: the largest epoch below it, ending where the next starts.
    assert cache.end_offset_for(4, leo) == EpochEndOffset(3, 25)
    assert cache.end_offset_for(5, leo) == EpochEndOffset(3, 25)
    # Below the first epoch: the requested epoch, ending where the first one starts.
    assert cache.end_offset_for(0, leo) == EpochEndOffset(0, 0)
    # Past the latest, or undefined: undefined.
    assert cache.end_offset_for(7, leo).undefined
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == EpochEndOffset(
        UNDEFINED_EPOCH, UNDEFINED_OFFSET
    )
    assert LeaderEpochCache(None).end_offset_for(3, 10).undefined


def test_truncate_from_end_and_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert not cache.truncate_from_end(26)  # 6 starts before the cut: kept
    assert cache.truncate_from_end(25)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10)]
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert cache.truncate_from_start(12)
    assert cache.entries() == [EpochEntry(3, 12), EpochEntry(6, 25)]
    assert cache.truncate_from_start(25)
    assert cache.entries() == [EpochEntry(6, 25)]
    assert not cache.truncate_from_start(20)
    assert cache.epoch_for_offset(30) == 6
    assert cache.epoch_for_offset(3) == UNDEFINED_EPOCH


def test_checkpoint_is_kafkas_text_format_and_survives_reload(tmp_path: Path) -> None:
    cache_with(tmp_path, (0, 0), (4, 17))
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n4 17\n"
    loaded, trusted = LeaderEpochCache.load(tmp_path)
    assert trusted
    assert loaded.entries() == [EpochEntry(0, 0), EpochEntry(4, 17)]
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_checkpoint_is_an_empty_trusted_map(tmp_path: Path) -> None:
    cache, trusted = LeaderEpochCache.load(tmp_path)
    assert trusted
    assert len(cache) == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0\n",
        "1\n0\n",  # unknown version
        "0\n2\n0 0\n",  # count does not match
        "0\n1\n0\n",  # entry without an offset
        "0\n2\n3 10\n2 20\n",  # epochs not ascending
        "0\n2\n2 10\n3 5\n",  # offsets going back
        "0\n1\n-1 0\n",
        "0\n1\nx y\n",
    ],
)
def test_damaged_checkpoints_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(CorruptCheckpointError):
        parse_checkpoint(text)
    (tmp_path / CHECKPOINT_FILE).write_text(text)
    cache, trusted = LeaderEpochCache.load(tmp_path)
    assert not trusted
    assert len(cache) == 0


def test_binary_garbage_is_not_trusted(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"\xff\xfe\x00garbage")
    _cache, trusted = LeaderEpochCache.load(tmp_path)
    assert not trusted


entries_strategy = st.lists(
    st.tuples(st.integers(0, 50), st.integers(0, 1000)), min_size=0, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(entries_strategy)
def test_any_assign_sequence_stays_ascending_and_round_trips(
    assigns: list[tuple[int, int]],
) -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in assigns:
        cache.assign(epoch, start)
        entries = cache.entries()
        assert all(a.epoch < b.epoch for a, b in itertools.pairwise(entries))
        assert all(a.start_offset < b.start_offset for a, b in itertools.pairwise(entries))
        # The entry just assigned is the latest one.
        assert entries[-1] == EpochEntry(epoch, start) or (
            entries[-1].epoch == epoch and entries[-1].start_offset <= start
        )
    assert parse_checkpoint(format_checkpoint(cache.entries())) == cache.entries()
