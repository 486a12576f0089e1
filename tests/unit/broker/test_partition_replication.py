"""PartitionLog's replication layer on real directories: leader epochs stamped and checkpointed,
truncation, appends as a follower, a high watermark apart from the log end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from headwater.errors import CorruptRecordError, OffsetOutOfRangeError
from headwater.records.batch import decode_batches, encode_batch, iter_batches
from headwater.types import PartitionId
from headwater_broker.log.leader_epoch import CHECKPOINT_FILE, EpochEntry
from headwater_broker.log.local_log import FsyncPolicy
from headwater_broker.log.partition import PartitionLog
from headwater_broker.log.watermarks import HIGH_WATERMARK_FILE
from headwater_broker.replication.follower import FollowerPartition
from headwater_broker.topic_config import TopicConfig

pytestmark = pytest.mark.anyio
NOW = 1_800_000_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def batch(n: int, *, size: int = 20, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (None, bytes([65 + i % 26]) * size, []) for i in range(n)
    ]
    return encode_batch(
        records, timestamp_ms=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def open_log(
    path: Path, *, replicated: bool = True, fsync: FsyncPolicy = "never", **config: Any
) -> PartitionLog:
    return PartitionLog.open(
        path, "t", PartitionId(0), TopicConfig(**config), fsync, replicated=replicated
    )


async def lead(plog: PartitionLog, epoch: int, *batches: bytes) -> list[tuple[int, int]]:
    body = bytearray(b"".join(batches))
    results = await plog.append(body, list(iter_batches(body)), NOW, leader_epoch=epoch)
    return [(r.base_offset, r.last_offset) for r in results]


def stored(plog: PartitionLog, start: int = 0, end: int | None = None) -> bytes:
    """The log's batches from ``start`` up to ``end`` (default: the log end), as bytes."""
    end = plog.log_end_offset if end is None else end
    out = b""
    offset = start
    while offset < end:
        data = plog.read(offset, 1 << 20, upper_bound=end)
        if not data.data:
            break
        out += data.data
        offset = data.next_offset
    return out


def epochs_in(data: bytes) -> list[int]:
    return [h.partition_leader_epoch for _p, h in iter_batches(data)]


def crash(plog: PartitionLog) -> None:
    for segment in plog.local.segments:
        segment.close()


async def test_leader_stamps_its_epoch_and_checkpoints_each_new_one(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert await lead(plog, 3, batch(2), batch(1)) == [(0, 1), (2, 2)]
    assert await lead(plog, 5, batch(3)) == [(3, 5)]
    data = stored(plog)
    assert epochs_in(data) == [3, 3, 5]
    assert len(list(iter_batches(data))) == 3  # CRCs intact: the epoch is outside the CRC
    assert plog.epochs.entries() == [EpochEntry(3, 0), EpochEntry(5, 3)]
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n3 0\n5 3\n"
    # Becoming leader records the new epoch at the log end before anything is written.
    plog.assign_leader_epoch(7)
    assert plog.epochs.entries()[-1] == EpochEntry(7, 6)


async def test_high_watermark_is_apart_from_the_log_end_and_bounds_reads(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    await lead(plog, 1, batch(2), batch(2), batch(2))
    assert (plog.log_end_offset, plog.local_end_offset, plog.high_watermark) == (6, 6, 0)
    assert plog.read(0, 1 << 20).data == b""  # nothing readable below a high watermark of 0
    # A consumer ahead of the high watermark (but not past the log end) waits: empty, no 416.
    assert plog.read(4, 1 << 20).data == b""
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(7, 1 << 20)
    assert plog.advance_high_watermark(4)
    assert [r.offset for r in decode_batches(plog.read(0, 1 << 20).data)] == [0, 1, 2, 3]
    assert not plog.advance_high_watermark(3)  # never backwards
    assert plog.advance_high_watermark(99)  # never past the log end
    assert plog.high_watermark == 6
    # A follower's read goes up to the bound it names.
    plog2 = open_log(tmp_path / "b")
    await lead(plog2, 1, batch(2))
    assert len(plog2.read(0, 1 << 20, upper_bound=2).data) > 0


async def test_unreplicated_partitions_keep_high_watermark_at_the_log_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path, replicated=False)
    await lead(plog, 1, batch(2))
    assert plog.high_watermark == plog.log_end_offset == 2
    replicated = open_log(tmp_path / "r")
    await lead(replicated, 1, batch(2))
    replicated.set_replicated(False)
    assert replicated.high_watermark == 2


async def test_high_watermark_is_checkpointed_and_restored(tmp_path: Path) -> None:
    plog = open_log(tmp_path, fsync="interval")
    await lead(plog, 1, batch(5))
    plog.advance_high_watermark(3)
    assert plog.checkpoint_high_watermark()
    assert not plog.checkpoint_high_watermark()  # unchanged: not rewritten
    assert (tmp_path / HIGH_WATERMARK_FILE).read_text() == "3\n"
    plog.advance_high_watermark(5)
    crash(plog)  # the move to 5 was never checkpointed
    reopened = open_log(tmp_path)
    assert (reopened.log_end_offset, reopened.high_watermark) == (5, 3)
    reopened.advance_high_watermark(5)
    reopened.close()  # a clean close checkpoints it
    assert open_log(tmp_path).high_watermark == 5
    # Unreplicated, the checkpoint is not used: everything local is readable.
    assert open_log(tmp_path, replicated=False).high_watermark == 5


async def test_truncate_to_cuts_whole_batches_across_segments(tmp_path: Path) -> None:
    one = batch(2, size=60)
    plog = open_log(tmp_path, segment_bytes=2 * len(one))
    for epoch in (1, 1, 2, 2, 3, 3, 3):
        await lead(plog, epoch, batch(2, size=60))
    assert plog.log_end_offset == 14
    assert len(plog.local.segments) == 4
    plog.advance_high_watermark(14)
    # Offset 7 is inside the batch [6, 7]: that batch goes too.
    assert await plog.truncate_to(7) == 6
    assert (plog.log_end_offset, plog.high_watermark, plog.local_end_offset) == (6, 6, 6)
    assert [s.base_offset for s in plog.local.segments] == [0, 4]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000004.log",
    ]
    assert plog.epochs.entries() == [EpochEntry(1, 0), EpochEntry(2, 4)]
    assert [r.offset for r in decode_batches(stored(plog))] == list(range(6))
    # Appends continue at the new end, into the segment that was cut.
    assert await lead(plog, 4, batch(1)) == [(6, 6)]
    assert plog.epochs.entries()[-1] == EpochEntry(4, 6)
    # The cut is durable: a crash now reopens the same log, indexes and epochs.
    crash(plog)
    reopened = open_log(tmp_path, segment_bytes=2 * len(one))
    assert reopened.log_end_offset == 7
    assert epochs_in(stored(reopened)) == [1, 1, 2, 4]
    assert reopened.epochs.entries() == [EpochEntry(1, 0), EpochEntry(2, 4), EpochEntry(4, 6)]
    assert [r.offset for r in decode_batches(reopened.read(5, 1 << 20, upper_bound=7).data)] == [
        4,
        5,
        6,
    ]


async def test_truncate_at_a_segment_base_and_past_the_end(tmp_path: Path) -> None:
    one = batch(2, size=60)
    plog = open_log(tmp_path, segment_bytes=2 * len(one))
    for _ in range(4):
        await lead(plog, 1, batch(2, size=60))
    assert await plog.truncate_to(20) == 8  # past the end: nothing changes
    assert await plog.truncate_to(4) == 4
    assert [s.base_offset for s in plog.local.segments] == [0, 4]
    assert plog.local.active.size == 0
    assert await plog.truncate_to(0) == 0
    assert plog.log_end_offset == 0
    assert plog.epochs.entries() == []
    assert await lead(plog, 2, batch(1)) == [(0, 0)]


async def test_truncate_below_the_log_start_restarts_the_log_there(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    await lead(plog, 1, batch(3))
    await plog.truncate_fully_and_start_at(40)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (40, 40, 40)
    assert [p.name for p in tmp_path.glob("*.log")] == ["00000000000000000040.log"]
    crash(plog)
    assert open_log(tmp_path).log_start_offset == 40


async def test_follower_appends_the_leaders_batches_byte_for_byte(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", segment_bytes=300)
    follower = open_log(tmp_path / "follower", segment_bytes=450)
    for epoch in (1, 1, 2, 4):
        await lead(leader, epoch, batch(3), batch(1))
    assert await follower.append_as_follower(stored(leader, 0, 8), NOW) == 8
    assert await follower.append_as_follower(stored(leader, 8), NOW) == 8
    assert stored(follower) == stored(leader)
    assert follower.epochs.entries() == leader.epochs.entries()
    assert follower.log_end_offset == leader.log_end_offset == 16
    assert follower.high_watermark == 0  # learnt from the leader, not from appends


async def test_follower_refuses_batches_that_do_not_continue_its_log(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    await lead(leader, 1, batch(2), batch(2))
    with pytest.raises(CorruptRecordError, match="starts at offset 2, expected 0"):
        await follower.append_as_follower(stored(leader, 2), NOW)
    first = stored(leader, 0, 2)
    with pytest.raises(CorruptRecordError):
        await follower.append_as_follower(first + first, NOW)  # a repeated batch
    assert follower.log_end_offset == 0
    corrupt = bytearray(first)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        await follower.append_as_follower(bytes(corrupt), NOW)
    assert follower.log_end_offset == 0
    assert not any(p.stat().st_size for p in (tmp_path / "follower").glob("*.log"))


async def test_follower_rebuilds_producer_state_so_a_retry_is_deduplicated(
    tmp_path: Path,
) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    sent = [batch(2, pid=9, epoch=0, seq=0), batch(3, pid=9, epoch=0, seq=2)]
    await lead(leader, 1, batch(1))
    await lead(leader, 1, *sent)
    await follower.append_as_follower(stored(leader), NOW)
    # The follower becomes leader; the producer, not having seen its answer, retries.
    body = bytearray(sent[1])
    results = await follower.append(body, list(iter_batches(body)), NOW, leader_epoch=2)
    assert [(r.base_offset, r.last_offset, r.duplicate) for r in results] == [(3, 5, True)]
    assert follower.log_end_offset == 6
    # A crash and restart of the new leader keeps it so (state from the log, no snapshot).
    crash(follower)
    reopened = open_log(tmp_path / "follower")
    body = bytearray(sent[1])
    again = await reopened.append(body, list(iter_batches(body)), NOW, leader_epoch=2)
    assert again[0].duplicate


async def test_truncation_rebuilds_producer_state(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    await lead(plog, 1, batch(2, pid=9, epoch=0, seq=0))
    await lead(plog, 1, batch(2, pid=9, epoch=0, seq=2))
    plog.close()  # writes a snapshot at offset 4 that the truncation must not trust
    plog = open_log(tmp_path)
    await plog.truncate_to(2)
    assert not (tmp_path / f"{4:020d}.snapshot").exists()
    # The batch with sequence 2 is gone: sending it again stores it anew, at offset 2.
    body = bytearray(batch(2, pid=9, epoch=0, seq=2))
    results = await plog.append(body, list(iter_batches(body)), NOW, leader_epoch=2)
    assert [(r.base_offset, r.duplicate) for r in results] == [(2, False)]


async def test_damaged_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=200)
    for epoch in (1, 1, 3, 3, 6):
        await lead(plog, epoch, batch(2))
    expected = plog.epochs.entries()
    assert len(plog.local.segments) > 2
    plog.close()
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n1 0\n")  # torn: count says 3
    reopened = open_log(tmp_path, segment_bytes=200)
    assert reopened.epochs.entries() == expected
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n3\n1 0\n3 4\n6 8\n"


async def test_epochs_past_a_crash_cut_are_forgotten(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    await lead(plog, 1, batch(2))
    await lead(plog, 2, batch(2))
    crash(plog)
    log_file = tmp_path / "00000000000000000000.log"
    size = log_file.stat().st_size
    with open(log_file, "r+b") as f:
        f.truncate(size - 5)  # the epoch-2 batch is torn
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 2
    assert reopened.epochs.entries() == [EpochEntry(1, 0)]


async def test_retention_moves_the_first_epoch_to_the_new_log_start(tmp_path: Path) -> None:
    one = batch(2, size=60)
    plog = open_log(tmp_path, segment_bytes=2 * len(one), retention_bytes=2 * len(one))
    for _ in range(5):
        await lead(plog, 1, batch(2, size=60))
    assert await plog.enforce_retention(NOW) > 0
    assert plog.epochs.entries() == [EpochEntry(1, plog.log_start_offset)]


async def test_fsync_always_counts_only_synced_batches_as_the_local_end(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader", fsync="always")
    follower = open_log(tmp_path / "follower", fsync="always")
    await lead(leader, 1, batch(2), batch(3))
    # The leader's append returns once synced: its local end (what the high watermark may
    # count) is then its log end.
    assert leader.local_end_offset == leader.log_end_offset == 5
    await follower.append_as_follower(stored(leader), NOW)
    # So does the follower's: the fetch offset it reports next counts only synced batches.
    assert follower.local_end_offset == follower.log_end_offset == 5
    assert not follower.local.active.dirty


async def test_a_follower_names_its_log_end_in_a_fetch_only_once_it_is_synced(
    tmp_path: Path,
) -> None:
    # A former leader's append (or the apply of a fetcher replaced for a new leader) may still be
    # syncing when the next fetch is built; the leader counts that fetch offset towards the high
    # watermark, so it must name durable batches only.
    plog = open_log(tmp_path, fsync="always")
    appending = asyncio.create_task(lead(plog, 1, batch(2)))
    while plog.log_end_offset == 0:
        await asyncio.sleep(0)
    assert plog.local_end_offset == 0  # written; its fdatasync has not run yet
    follower = FollowerPartition(plog, leader_id=2, leader_epoch=2)
    entry = await follower.durable_fetch_entry()
    assert (entry.fetch_offset, plog.local_end_offset) == (2, 2)
    assert not plog.local.active.dirty
    await appending


async def test_recovery_keeps_older_epochs_when_a_newer_one_wrote_nothing(tmp_path: Path) -> None:
    # Epoch 1 wrote offsets 0-5 over two segments; the replica became leader of epoch 2 at the
    # log end and wrote nothing before a crash. Recovery drops (2, 6) (past the log end) and
    # must keep (1, 0): the epoch-1 batch at 5 in the active segment is no new epoch.
    one = batch(1)
    plog = open_log(tmp_path, segment_bytes=5 * len(one))
    for _ in range(6):
        await lead(plog, 1, one)
    assert len(plog.local.segments) == 2
    plog.assign_leader_epoch(2)
    assert plog.epochs.entries() == [EpochEntry(1, 0), EpochEntry(2, 6)]
    crash(plog)
    plog = open_log(tmp_path, segment_bytes=5 * len(one))
    assert plog.epochs.entries() == [EpochEntry(1, 0)]
    crash(plog)
    assert open_log(tmp_path, segment_bytes=5 * len(one)).epochs.entries() == [EpochEntry(1, 0)]
