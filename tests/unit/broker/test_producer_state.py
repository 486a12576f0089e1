"""Idempotent-producer rules, snapshots and the durable producer id registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from headwater.types import ProducerEpoch
from headwater_broker.log.producer_state import (
    ProducerEntry,
    ProducerStateTable,
    StoredBatch,
    snapshot_offsets,
)
from headwater_broker.producer_registry import ProducerRegistry


def stored_table(*batches: tuple[int, int, int, int], epoch: int = 0) -> ProducerStateTable:
    table = ProducerStateTable()
    pending: dict[int, ProducerEntry] = {}
    for b in batches:
        table.pending_update(pending, 1, epoch, StoredBatch(*b), 100)
    table.commit(pending)
    return table


def test_first_batch_of_a_producer_must_start_at_sequence_zero() -> None:
    table = ProducerStateTable()
    assert table.check({}, 1, 0, 0, 4) is None
    with pytest.raises(OutOfOrderSequenceError):
        table.check({}, 1, 0, 5, 9)


def test_window_keeps_the_last_five_batches() -> None:
    table = stored_table(*[(i * 2, i * 2 + 1, i * 2, i * 2 + 1) for i in range(7)])
    entry = table.entries[1]
    assert [b.first_seq for b in entry.batches] == [4, 6, 8, 10, 12]
    assert table.check({}, 1, 0, 8, 9) == StoredBatch(8, 9, 8, 9)
    with pytest.raises(OutOfOrderSequenceError):
        table.check({}, 1, 0, 2, 3)  # older than the window: not recognisable as a retry
    assert table.check({}, 1, 0, 14, 20) is None


def test_new_epoch_restarts_sequences_and_fences_the_old_one() -> None:
    table = stored_table((0, 4, 0, 4))
    assert table.check({}, 1, 1, 0, 0) is None
    with pytest.raises(OutOfOrderSequenceError):
        table.check({}, 1, 1, 5, 5)
    pending: dict[int, ProducerEntry] = {}
    table.pending_update(pending, 1, 1, StoredBatch(0, 0, 5, 5), 200)
    table.commit(pending)
    with pytest.raises(InvalidProducerEpochError):
        table.check({}, 1, 0, 5, 5)


def test_sequence_wraps_after_int32_max() -> None:
    top = 2**31 - 1
    table = stored_table((top - 1, top, 0, 1))
    assert table.check({}, 1, 0, 0, 3) is None


def test_snapshot_round_trip_and_listing(tmp_path: Path) -> None:
    table = stored_table((0, 1, 10, 11), (2, 4, 12, 14))
    table.write_snapshot(tmp_path, 15, sync=True)
    table.write_snapshot(tmp_path, 3, sync=False)
    assert snapshot_offsets(tmp_path) == [3, 15]
    loaded = ProducerStateTable.load_snapshot(tmp_path / "00000000000000000015.snapshot")
    assert loaded is not None
    restored, offset = loaded
    assert offset == 15
    assert list(restored.entries[1].batches) == [
        StoredBatch(0, 1, 10, 11),
        StoredBatch(2, 4, 12, 14),
    ]
    (tmp_path / "00000000000000000003.snapshot").write_bytes(b"{not json")
    assert ProducerStateTable.load_snapshot(tmp_path / "00000000000000000003.snapshot") is None


def test_expiry_forgets_idle_producers() -> None:
    table = stored_table((0, 0, 0, 0))
    assert table.expire(100 + 1000, 1000) == []
    assert table.expire(100 + 1001, 1000) == [1]
    assert table.entries == {}


def test_registry_asks_the_store_only_for_unknown_ids_and_newer_epochs() -> None:
    registry = ProducerRegistry(1000)
    assert registry.needs_lookup(7, 0)
    with pytest.raises(UnknownProducerIdError):
        registry.judge(7, 0, None, 0)
    registry.judge(7, 1, ProducerEpoch(1), 0)
    assert not registry.needs_lookup(7, 1)
    with pytest.raises(InvalidProducerEpochError):
        registry.needs_lookup(7, 0)  # older than the epoch learnt: fenced without asking
    assert registry.needs_lookup(7, 2)  # bumped at another broker, perhaps: ask
    with pytest.raises(InvalidProducerEpochError):
        registry.judge(7, 2, ProducerEpoch(1), 0)
    registry.touch(8, 500)  # known from a partition's state after a restart
    assert registry.needs_lookup(8, 0)
    assert registry.expire(1001) == [7]
    assert registry.needs_lookup(7, 1)
