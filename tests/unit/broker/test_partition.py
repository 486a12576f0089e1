"""PartitionLog on a real directory: offsets, segments, indexes, reads, retention and recovery."""

from __future__ import annotations

import asyncio
import os
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

from headwater.errors import (
    InvalidProducerEpochError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from headwater.records.batch import decode_batch, decode_batches, encode_batch, iter_batches
from headwater.types import Offset, PartitionId, TimestampMs
from headwater_broker.log.partition import AppendResult, PartitionLog
from headwater_broker.topic_config import TopicConfig

NOW = 1_800_000_000_000


def batch(
    n: int,
    *,
    size: int = 10,
    ts: int = NOW,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytes:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (None, bytes([65 + i % 26]) * size, []) for i in range(n)
    ]
    return encode_batch(
        records, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def open_log(path: Path, **config: Any) -> PartitionLog:
    return PartitionLog.open(path, "t", PartitionId(0), TopicConfig(**config), "never")


def result(base: int, last: int, duplicate: bool) -> AppendResult:
    return AppendResult(Offset(base), Offset(last), TimestampMs(-1), duplicate)


def append(plog: PartitionLog, *batches: bytes, now: int = NOW) -> list[AppendResult]:
    body = bytearray(b"".join(batches))
    return asyncio.run(plog.append(body, list(iter_batches(body)), now))


def crash(plog: PartitionLog) -> None:
    """Drop a log as kill -9 would: files closed, no index or snapshot written."""
    for segment in plog.local.segments:
        segment.close()


def offsets_read(plog: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> list[int]:
    return [r.offset for r in decode_batches(plog.read(offset, max_bytes).data)]


def logs(path: Path) -> list[str]:
    return sorted(p.name for p in path.glob("*.log"))


def test_offsets_start_at_zero_and_count_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    results = append(plog, batch(2), batch(3), batch(1))
    assert [(r.base_offset, r.last_offset, r.duplicate) for r in results] == [
        (0, 1, False),
        (2, 4, False),
        (5, 5, False),
    ]
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (0, 6, 6)
    assert offsets_read(plog, 0) == [0, 1, 2, 3, 4, 5]
    # A fetch starts at the batch holding the offset, as Kafka's does.
    assert offsets_read(plog, 3) == [2, 3, 4, 5]
    data = plog.read(3, 1 << 20)
    assert (data.next_offset, data.high_watermark) == (6, 6)


def test_stored_bytes_equal_sent_bytes_except_base_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(4))
    sent = batch(2, size=7)
    append(plog, sent)
    stored = plog.read(4, 1 << 20).data
    assert stored[8:] == sent[8:]
    assert struct.unpack(">q", stored[:8]) == (4,)


def test_read_at_end_is_empty_and_outside_range_is_41601(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3))
    assert plog.read(3, 100).data == b""
    with pytest.raises(OffsetOutOfRangeError) as info:
        plog.read(4, 100)
    assert info.value.message == (
        "Offset 4 is out of range for partition t-0: valid range is [0, 3]"
    )


def test_max_bytes_returns_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first, second = batch(5, size=100), batch(5, size=100)
    append(plog, first, second)
    one = plog.read(0, 10)
    assert (len(one.data), one.next_offset) == (len(first), 5)
    both = plog.read(0, len(first) + len(second))
    assert (len(both.data), both.next_offset) == (len(first) + len(second), 10)
    cut = plog.read(0, len(first) + len(second) - 1)
    assert (len(cut.data), cut.next_offset) == (len(first), 5)


def test_segments_roll_on_segment_bytes_and_are_named_by_base_offset(tmp_path: Path) -> None:
    one = batch(2, size=50)
    plog = open_log(tmp_path, segment_bytes=2 * len(one))
    for _ in range(5):
        append(plog, one)
    assert logs(tmp_path) == [
        "00000000000000000000.log",
        "00000000000000000004.log",
        "00000000000000000008.log",
    ]
    assert offsets_read(plog, 5, 1) == [4, 5]
    assert offsets_read(plog, 8) == [8, 9]


def test_one_request_spanning_segments_is_split_at_batch_boundaries(tmp_path: Path) -> None:
    one = batch(1, size=50)
    plog = open_log(tmp_path, segment_bytes=2 * len(one))
    results = append(plog, *[one] * 5)
    assert [r.base_offset for r in results] == [0, 1, 2, 3, 4]
    assert logs(tmp_path) == [
        "00000000000000000000.log",
        "00000000000000000002.log",
        "00000000000000000004.log",
    ]
    assert [(tmp_path / name).stat().st_size for name in logs(tmp_path)] == [
        2 * len(one),
        2 * len(one),
        len(one),
    ]


def test_sparse_index_file_has_one_entry_per_interval(tmp_path: Path) -> None:
    one = batch(1, size=40)
    size = len(one)
    plog = open_log(tmp_path, index_interval_bytes=2 * size, segment_bytes=10 * size)
    for _ in range(11):
        append(plog, one)
    # Kafka's rule: index a batch once more than interval bytes were written since the last entry.
    index = (tmp_path / "00000000000000000000.index").read_bytes()
    entries = list(struct.iter_unpack(">II", index))
    assert entries == [(3, 3 * size), (6, 6 * size), (9, 9 * size)]
    timeindex = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    assert list(struct.iter_unpack(">qI", timeindex)) == [(NOW, 2)]
    assert offsets_read(plog, 7, 1) == [7]


def test_segment_rolls_when_its_index_is_full(tmp_path: Path) -> None:
    one = batch(1, size=40)
    plog = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=16)
    for _ in range(5):
        append(plog, one)
    # Entries for batches 1 and 2 fill 16 bytes; batch 3 starts a new segment.
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000003.log"]


def test_segment_rolls_on_segment_ms(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_ms=1000)
    append(plog, batch(1), now=NOW)
    append(plog, batch(1), now=NOW + 500)
    append(plog, batch(1), now=NOW + 1500)
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000002.log"]


def test_torn_tail_is_cut_and_appends_continue_at_the_right_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3), batch(2))
    crash(plog)
    path = tmp_path / "00000000000000000000.log"
    good = path.stat().st_size
    with open(path, "ab") as f:
        f.write(batch(4)[:30])  # a half-written batch
    reopened = open_log(tmp_path)
    assert path.stat().st_size == good
    assert reopened.log_end_offset == 5
    assert [r.base_offset for r in append(reopened, batch(1))] == [5]
    assert offsets_read(reopened, 0) == [0, 1, 2, 3, 4, 5]


def test_garbage_tail_and_bad_crc_are_cut(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(1), batch(1), batch(1))
    crash(plog)
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    second = len(batch(1))
    data[second + 70] ^= 0xFF  # corrupt the second batch's records: its CRC no longer matches
    path.write_bytes(bytes(data) + b"\x00garbage")
    reopened = open_log(tmp_path)
    assert path.stat().st_size == second
    assert reopened.log_end_offset == 1
    assert [r.base_offset for r in append(reopened, batch(2))] == [1]


def test_missing_or_corrupt_indexes_of_closed_segments_are_rebuilt(tmp_path: Path) -> None:
    one = batch(1, size=40)
    plog = open_log(tmp_path, index_interval_bytes=0, segment_bytes=4 * len(one))
    for _ in range(6):
        append(plog, one)
    plog.close()
    index = tmp_path / "00000000000000000000.index"
    expected = index.read_bytes()
    index.write_bytes(b"\x01\x02\x03")
    (tmp_path / "00000000000000000000.timeindex").unlink()
    reopened = open_log(tmp_path, index_interval_bytes=0, segment_bytes=4 * len(one))
    assert index.read_bytes() == expected
    assert offsets_read(reopened, 2, 1) == [2]
    assert reopened.log_end_offset == 6


def every_offset(plog: PartitionLog) -> list[int]:
    """Every offset from the log start, reading segment after segment."""
    offsets: list[int] = []
    position = int(plog.log_start_offset)
    while position < plog.high_watermark:
        read = plog.read(position, 1 << 20)
        offsets += [r.offset for r in decode_batches(read.data)]
        position = read.next_offset
    return offsets


def three_segments(path: Path) -> tuple[int, list[str]]:
    """Segments of four 1-record batches at 0, 4 and 8 (ending at 10), closed as after a crash;
    the size of one batch and the segment files."""
    one = batch(1, size=40)
    plog = open_log(path, index_interval_bytes=0, segment_bytes=4 * len(one))
    for _ in range(10):
        append(plog, one)
    assert logs(path) == [f"{base:020d}.log" for base in (0, 4, 8)]
    plog.close()
    return len(one), logs(path)


@pytest.mark.parametrize("loss", ["cut", "zeros", "cut, no index"])
def test_a_closed_segment_that_lost_its_tail_ends_the_log(tmp_path: Path, loss: str) -> None:
    """A closed segment that lost its tail (a damaged disk, a directory copied part-way) while
    newer segments survived: the log is cut where the loss begins, so it stays a prefix."""
    size, _ = three_segments(tmp_path)
    second = tmp_path / "00000000000000000004.log"
    data = second.read_bytes()
    if loss == "zeros":
        second.write_bytes(data[: 2 * size] + bytes(len(data) - 2 * size))
    else:
        second.write_bytes(data[: 2 * size + 7])  # records 4 and 5, then part of 6
    if loss == "cut, no index":
        (tmp_path / "00000000000000000004.index").unlink()
    reopened = open_log(tmp_path, index_interval_bytes=0, segment_bytes=4 * size)
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000004.log"]
    assert second.stat().st_size == 2 * size
    assert (reopened.log_end_offset, reopened.high_watermark) == (6, 6)
    assert every_offset(reopened) == [0, 1, 2, 3, 4, 5]
    assert [r.base_offset for r in append(reopened, batch(1, size=40))] == [6]
    assert every_offset(reopened) == [0, 1, 2, 3, 4, 5, 6]


def test_whole_closed_segments_are_kept_as_they_are(tmp_path: Path) -> None:
    size, before = three_segments(tmp_path)
    reopened = open_log(tmp_path, index_interval_bytes=0, segment_bytes=4 * size)
    assert logs(tmp_path) == before
    assert reopened.log_end_offset == 10
    assert every_offset(reopened) == list(range(10))


def test_log_append_time_topics_stamp_batches(tmp_path: Path) -> None:
    plog = open_log(tmp_path, log_append_time=True)
    (result,) = append(plog, batch(2, ts=5), now=NOW + 7)
    assert result.log_append_time == NOW + 7
    header, records = decode_batch(plog.read(0, 1 << 20).data)
    assert (header.max_timestamp, header.timestamp_type) == (NOW + 7, 1)
    assert [r.timestamp for r in records] == [NOW + 7, NOW + 7]


def test_lookup_by_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=200, index_interval_bytes=0)
    for i in range(6):
        append(plog, batch(2, ts=1000 * (i + 1)))
    assert plog.lookup_timestamp(0) == (0, 1000)
    assert plog.lookup_timestamp(3500) == (6, 4000)
    assert plog.lookup_timestamp(6000) == (10, 6000)
    assert plog.lookup_timestamp(6001) is None


def test_retention_ms_deletes_whole_segments_and_keeps_offsets(tmp_path: Path) -> None:
    one = batch(2, size=50, ts=NOW - 10_000)
    plog = open_log(tmp_path, segment_bytes=2 * len(one), retention_ms=5000)
    for _ in range(3):
        append(plog, one)
    append(plog, batch(1, ts=NOW))
    assert logs(tmp_path) == ["00000000000000000000.log", "00000000000000000004.log"]
    assert asyncio.run(plog.enforce_retention(NOW)) == 1
    assert logs(tmp_path) == ["00000000000000000004.log"]
    assert (plog.log_start_offset, plog.log_end_offset) == (4, 7)
    with pytest.raises(OffsetOutOfRangeError) as info:
        plog.read(3, 100)
    assert info.value.message.endswith("valid range is [4, 7]")
    assert offsets_read(plog, 4) == [4, 5, 6]


def test_retention_of_everything_leaves_an_empty_segment_at_the_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path, retention_ms=1000)
    append(plog, batch(3, ts=NOW - 5000))
    assert asyncio.run(plog.enforce_retention(NOW)) == 1
    assert logs(tmp_path) == ["00000000000000000003.log"]
    assert (plog.log_start_offset, plog.log_end_offset) == (3, 3)
    assert plog.read(3, 100).data == b""
    crash(plog)
    reopened = open_log(tmp_path, retention_ms=1000)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 3)
    assert [r.base_offset for r in append(reopened, batch(2))] == [3]


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path: Path) -> None:
    one = batch(1, size=50)
    size = len(one)
    plog = open_log(tmp_path, segment_bytes=size, retention_bytes=2 * size)
    for _ in range(5):
        append(plog, one)
    assert asyncio.run(plog.enforce_retention(NOW)) == 3
    assert logs(tmp_path) == ["00000000000000000003.log", "00000000000000000004.log"]
    assert plog.log_start_offset == 3


def test_log_start_offset_is_checkpointed(tmp_path: Path) -> None:
    one = batch(1, size=50, ts=NOW - 10_000)
    plog = open_log(tmp_path, segment_bytes=len(one), retention_ms=1000)
    for _ in range(3):
        append(plog, one)
    asyncio.run(plog.enforce_retention(NOW))
    assert (tmp_path / "log-start-offset").read_text() == "3\n"
    plog.close()
    assert open_log(tmp_path).log_start_offset == 3


def test_idempotent_retry_gets_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    first = batch(3, pid=7, epoch=0, seq=0)
    append(plog, batch(2))
    assert append(plog, first) == [result(2, 4, False)]
    size = plog.local.active.size
    assert append(plog, first) == [result(2, 4, True)]
    assert (plog.local.active.size, plog.log_end_offset) == (size, 5)


def test_sequence_gap_and_stale_epoch_are_rejected_without_change(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3, pid=7, epoch=1, seq=0))
    with pytest.raises(OutOfOrderSequenceError) as gap:
        append(plog, batch(1, pid=7, epoch=1, seq=4))
    assert gap.value.message == (
        "Producer 7 epoch 1: expected sequence 3, got 4 (last stored batch 0..2)"
    )
    with pytest.raises(InvalidProducerEpochError):
        append(plog, batch(1, pid=7, epoch=0, seq=3))
    # A whole request is judged before anything is written: a good batch before a gap is not kept.
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, batch(1, pid=7, epoch=1, seq=3), batch(1, pid=7, epoch=1, seq=9))
    assert plog.log_end_offset == 3
    assert append(plog, batch(1, pid=7, epoch=1, seq=3))[0].base_offset == 3


def test_producer_state_survives_clean_restart_and_crash(tmp_path: Path) -> None:
    plog = open_log(tmp_path, segment_bytes=300)
    batches = [batch(2, size=40, pid=3, epoch=0, seq=2 * i) for i in range(4)]
    for b in batches:
        append(plog, b)
    plog.close()
    reopened = open_log(tmp_path, segment_bytes=300)
    assert append(reopened, batches[3]) == [result(6, 7, True)]
    append(reopened, batch(2, size=40, pid=3, epoch=0, seq=8))
    crash(reopened)  # no snapshot at the end: state comes back from the log's batch headers
    again = open_log(tmp_path, segment_bytes=300)
    assert append(again, batch(2, size=40, pid=3, epoch=0, seq=8))[0].duplicate
    with pytest.raises(OutOfOrderSequenceError):
        append(again, batch(1, pid=3, epoch=0, seq=11))
    assert append(again, batch(1, pid=3, epoch=0, seq=10))[0].base_offset == 10


def test_a_flush_returns_only_once_a_flush_in_flight_elsewhere_made_the_bytes_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under BROKER_FSYNC=always the group-commit sync runs in a worker thread while a roll on the
    # event loop flushes the same segment: the roll must not go on (writing the producer snapshot
    # and the next segment durably) before the closing segment's bytes are durable.
    plog = open_log(tmp_path)
    append(plog, batch(2))
    segment = plog.local.active
    real = os.fdatasync
    in_flight, release = threading.Event(), threading.Event()
    events: list[str] = []

    def fdatasync(fd: int) -> None:
        if not in_flight.is_set():
            in_flight.set()
            release.wait(timeout=30)
        real(fd)
        events.append("synced")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    worker = threading.Thread(target=segment.flush)
    worker.start()
    assert in_flight.wait(timeout=30)

    def roll_flush() -> None:
        segment.flush()
        events.append("roll's flush done")

    roll = threading.Thread(target=roll_flush)
    roll.start()
    roll.join(timeout=0.5)  # a flush that does not wait has returned by now
    release.set()
    worker.join(timeout=30)
    roll.join(timeout=30)
    assert events == ["synced", "roll's flush done"]


def test_batches_larger_than_the_scan_chunk_are_found_and_read_whole(tmp_path: Path) -> None:
    big = batch(2, size=50_000)  # ~100 KB, larger than the 64 KiB header-scan chunk
    plog = open_log(tmp_path, index_interval_bytes=10_000_000)
    for _ in range(4):
        append(plog, big)
    assert len(plog.local.active.index) == 0  # every lookup scans headers from position 0
    data = plog.read(7, 1)
    assert (len(data.data), data.next_offset, data.records) == (len(big), 8, 2)
    assert offsets_read(plog, 5, 2 * len(big)) == [4, 5, 6, 7]
    crash(plog)
    assert open_log(tmp_path).log_end_offset == 8


def test_a_roll_that_fails_to_write_is_a_storage_error_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk while a segment rolls (the index write fails): 50003, not an internal error;
    # the log stays as it was, and appends go on once the disk has room again.
    import errno

    from headwater.errors import StorageError
    from headwater_broker.log.segment import Segment

    one = batch(1)
    plog = open_log(tmp_path, segment_bytes=2 * len(one))
    append(plog, one, one)

    def full(self: Segment) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(Segment, "write_indexes", full)
        with pytest.raises(StorageError) as refused:
            append(plog, one)
    assert refused.value.error_code == 50003
    assert plog.log_end_offset == 2
    assert logs(tmp_path) == [f"{0:020d}.log"]
    assert [r.base_offset for r in append(plog, one)] == [2]
    assert (offsets_read(plog, 0), offsets_read(plog, 2)) == ([0, 1], [2])
