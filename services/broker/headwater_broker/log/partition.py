"""One partition's log: ordered segments, offset assignment, reads, retention and recovery.

Offsets start at 0, only grow and are never reused: the active (last) segment is never deleted
-- when retention expires everything, a new empty active segment is rolled at the log end offset
first -- and its file name carries that offset across restarts. The log start offset (first
readable offset) is checkpointed in ``log-start-offset``. Layout of the directory: see segment.py.

Replication (docs/cluster.md, "Replication"). Three ends are kept apart:

- ``log_end_offset``: the next offset to assign; every batch below it is written (maybe unsynced).
- ``local_end_offset``: what this replica counts as its own log end when the high watermark is
  computed -- every written batch, or under ``BROKER_FSYNC=always`` only the fsynced ones.
- ``high_watermark``: consumers read below it only. A partition that is not ``replicated`` (one
  replica, the behaviour before the cluster) moves it with ``local_end_offset``; a replicated one
  has it moved by the replication layer (``advance_high_watermark``: the lowest log end over the
  in-sync set) and checkpoints it in ``replication-offset-checkpoint``.

A leader stamps its leader epoch into every batch it appends (``append(..., leader_epoch=)``) and
records each new epoch's first offset in the leader-epoch checkpoint (leader_epoch.py); a follower
appends the leader's batches unchanged (``append_as_follower``), offsets and epochs kept, and
rebuilds producer state from them; ``truncate_to`` cuts a divergent tail (segments, indexes,
epochs and producer state follow).

What runs on the event loop, what in threads, and how appends are serialised and synced: the
threading policy in ``headwater_broker.broker``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from headwater.errors import (
    BrokerError,
    CorruptRecordError,
    OffsetOutOfRangeError,
    StorageError,
    TopicNotFoundError,
)
from headwater.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    Buffer,
    decode_batch,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from headwater.types import Offset, PartitionId, TimestampMs
from headwater_broker.log.leader_epoch import LeaderEpochCache
from headwater_broker.log.producer_state import (
    ProducerEntry,
    ProducerStateTable,
    StoredBatch,
    snapshot_offsets,
)
from headwater_broker.log.segment import Segment, WrittenBatch
from headwater_broker.topic_config import TopicConfig

log = logging.getLogger("headwater.broker.partition")

FsyncPolicy = Literal["always", "interval", "never"]
"""When appended bytes are fdatasynced: before the append is answered (and readable), every
``BROKER_FSYNC_INTERVAL_MS`` in the background, or only when a segment rolls or closes."""
LOG_START_FILE = "log-start-offset"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
_MAX_IOV = 512  # stay well below IOV_MAX (1024) for one pwritev


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where one batch of an append request landed."""

    base_offset: Offset
    last_offset: Offset
    log_append_time: TimestampMs  # -1 unless the topic uses LogAppendTime
    duplicate: bool


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole stored batches read from a partition, and the partition's bounds at that moment."""

    data: bytes
    records: int  # records in the returned batches (some may precede the asked offset)
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


def fsync_directory(path: Path) -> None:
    """Make file creations, renames and deletions in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_disk_failure(error: BaseException) -> bool:
    """Whether ``error`` is a write to the data directory that failed (a full or broken disk:
    a StorageError caused by an OSError), rather than, say, a log closed under a request."""
    return isinstance(error, StorageError) and isinstance(error.__cause__, OSError)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLog:
    """The segmented log of one topic partition."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        fsync: FsyncPolicy,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.fsync = fsync
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = Offset(0)
        self.log_end_offset = Offset(0)  # next offset to assign (written, maybe not yet synced)
        self.local_end_offset = Offset(0)  # this replica's end for the high watermark
        self.high_watermark = Offset(0)  # next offset readers may see
        self.replicated = False  # the high watermark is moved by replication, not by appends
        self.epochs = LeaderEpochCache(directory, sync=fsync != "never")
        self.producers = ProducerStateTable()
        self.lock = asyncio.Lock()
        self._waiter: asyncio.Future[None] | None = None  # woken when the high watermark moves
        self._end_waiter: asyncio.Future[None] | None = None  # ... when the log end moves
        self._checkpointed_hw = -1
        self._sync_task: asyncio.Task[None] | None = None
        self.closed = False
        self.deleted = False

    # --- opening and recovery ----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: PartitionId,
        config: TopicConfig,
        fsync: FsyncPolicy,
        *,
        replicated: bool = False,
    ) -> PartitionLog:
        """Open (creating if needed) a partition directory, recovering from any crash.

        ``replicated``: start from the checkpointed high watermark instead of the log end.
        """
        plog = cls(directory, topic, partition, config, fsync)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.tmp"):
            stale.unlink(missing_ok=True)
        checkpoint = plog._read_log_start()
        bases = sorted(
            int(p.name[:20])
            for p in directory.glob("*.log")
            if len(p.name) == 24 and p.name[:20].isdigit()
        )
        if not bases:
            bases = [checkpoint]
        for i, (base, next_base) in enumerate(itertools.pairwise(bases)):
            closed = Segment.open_closed(directory, base, next_base, config.index_interval_bytes)
            if closed is None:
                plog._drop_segments_after(bases[i:])
                bases = bases[: i + 1]
                break
            plog.segments.append(closed)
        # A new first segment's name is made durable by the leader-epoch checkpoint's first
        # write (rename, then fsync of this directory), which precedes the first append.
        active, active_headers = Segment.recover_active(
            directory, bases[-1], config.index_interval_bytes
        )
        plog.segments.append(active)
        plog._bases = [s.base_offset for s in plog.segments]
        plog.log_end_offset = plog.local_end_offset = Offset(active.next_offset)
        plog.high_watermark = plog.log_end_offset
        plog.log_start_offset = Offset(
            min(max(checkpoint, plog.segments[0].base_offset), plog.log_end_offset)
        )
        plog._recover_epochs(active_headers)
        plog._recover_producers(active_headers)
        plog.replicated = replicated
        if replicated:
            plog.high_watermark = Offset(
                max(plog.log_start_offset, min(plog._read_high_watermark(), plog.log_end_offset))
            )
        return plog

    def _drop_segments_after(self, bases: list[int]) -> None:
        """Delete the segments newer than ``bases[0]``, whose segment lost its tail: the log is
        cut where the tail was lost (the first segment is recovered as the active one)."""
        for base in reversed(bases[1:]):  # newest first: a crash part-way leaves a prefix
            Segment(self.directory, base).delete()
        fsync_directory(self.directory)
        log.warning(
            "%s-%d: segment %d lost its tail; recovering it as the active segment and "
            "dropping the %d newer segments from offset %d on",
            self.topic,
            self.partition,
            bases[0],
            len(bases) - 1,
            bases[1],
            extra={"dropped_segments": len(bases) - 1},
        )

    def _recover_epochs(self, active_headers: list[BatchHeader]) -> None:
        """Load the leader-epoch checkpoint, rebuilt from batch headers if it is damaged."""
        epochs, trusted = LeaderEpochCache.load(self.directory, sync=self.fsync != "never")
        changed = False
        if not trusted:
            for segment in self.segments[:-1]:
                for _pos, header in segment.headers():
                    changed |= epochs.assign(
                        header.partition_leader_epoch, header.base_offset, flush=False
                    )
            changed = True
        # Entries past the recovered end describe batches the crash cut off; the active
        # segment's epochs may postdate the last checkpoint write (a crash). As Kafka's segment
        # recovery, only an epoch newer than the latest known is assigned: assigning an older
        # one would remove every entry from that epoch on, so a checkpoint [(1, 0), (2, 6)]
        # over an active segment starting with an epoch-1 batch at 5 became [(1, 5)].
        changed |= epochs.truncate_from_end(self.log_end_offset, flush=False)
        for header in active_headers:
            if header.partition_leader_epoch > epochs.latest_epoch:
                changed |= epochs.assign(
                    header.partition_leader_epoch, header.base_offset, flush=False
                )
        changed |= epochs.truncate_from_start(self.log_start_offset, flush=False)
        self.epochs = epochs
        if changed:
            epochs.flush()

    def _recover_producers(self, active_headers: list[BatchHeader] | None = None) -> None:
        """Producer state as of the log end: newest usable snapshot, then the headers after it."""
        self.producers = ProducerStateTable()
        if active_headers is None:
            active_headers = [h for _pos, h in self.active.headers()]
        end = self.log_end_offset
        offsets = snapshot_offsets(self.directory)
        start = -1
        for offset in reversed(offsets):
            path = self.directory / f"{offset:020d}.snapshot"
            if offset > end:
                path.unlink(missing_ok=True)  # describes batches a crash cut off
                continue
            if start < 0:
                loaded = ProducerStateTable.load_snapshot(path)
                if loaded is not None:
                    self.producers, start = loaded
        start = max(start, 0)
        for segment in self.segments[:-1]:
            if segment.next_offset > start:
                self.producers.replay(h for _pos, h in segment.headers() if h.base_offset >= start)
        self.producers.replay(h for h in active_headers if h.base_offset >= start)

    def _read_high_watermark(self) -> int:
        try:
            return int((self.directory / HIGH_WATERMARK_FILE).read_text().strip())
        except (OSError, ValueError):
            return 0

    def checkpoint_high_watermark(self) -> bool:
        """Write the high watermark to ``replication-offset-checkpoint`` if it moved; True if so.

        Atomic (temporary file, rename); fsynced unless the fsync policy is ``never``. A crash
        loses at most the movement since the last checkpoint: the high watermark only restarts
        lower, never higher than what replicas hold.
        """
        hw = self.high_watermark
        if hw == self._checkpointed_hw or not self.directory.exists():
            return False
        path = self.directory / HIGH_WATERMARK_FILE
        tmp = path.with_name(HIGH_WATERMARK_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{hw}\n")
            if self.fsync != "never":
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self._checkpointed_hw = hw
        return True

    def _read_log_start(self) -> int:
        try:
            return int((self.directory / LOG_START_FILE).read_text().strip())
        except (OSError, ValueError):
            return 0

    def _write_log_start(self) -> None:
        path = self.directory / LOG_START_FILE
        tmp = path.with_name(LOG_START_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{self.log_start_offset}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(self.directory)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # --- appending ---------------------------------------------------------------------------

    async def append(
        self,
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        now_ms: int,
        *,
        leader_epoch: int = -1,
        guard: Callable[[], None] | None = None,
    ) -> list[AppendResult]:
        """Append validated batches (``(position in buf, header)``), assigning their offsets.

        Producer sequence and epoch rules are checked for every batch before anything is
        written, so a rejected request changes nothing. ``buf`` is modified in place: base
        offsets, and with ``leader_epoch`` >= 0 (a replicated partition's leader) the batches'
        ``partitionLeaderEpoch``, recorded in the leader-epoch checkpoint when it is new.
        ``guard`` runs under the append lock, right before anything is judged or written, and
        refuses the append by raising (a leader that resigned while this append waited for the
        lock: the log may since have been truncated and appended to as a follower's).
        """
        async with self.lock:
            if self.closed:
                raise self._closed_error()
            if guard is not None:
                guard()
            results, writes = self._plan(batches, now_ms)
            if writes:
                if leader_epoch >= 0:
                    self._assign_epoch(leader_epoch, writes[0][1])
                self._write(buf, batches, writes, now_ms, leader_epoch=leader_epoch)
            written = self.log_end_offset
        if self.fsync == "always":
            # Outside the lock: appends that arrive meanwhile are written and share the next
            # fdatasync (group commit). Duplicates wait too: their original may be unsynced.
            await self._sync_until(written)
        return results

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch > self.epochs.latest_epoch:
            try:
                self.epochs.assign(epoch, start_offset)
            except OSError as exc:
                raise StorageError(f"writing the leader-epoch checkpoint: {exc}") from exc

    def assign_leader_epoch(self, epoch: int) -> None:
        """Record that ``epoch`` starts at the log end (a replica becoming leader, as Kafka's)."""
        self._assign_epoch(epoch, self.log_end_offset)

    async def append_as_follower(self, data: Buffer, now_ms: int) -> int:
        """Append a leader's batches as it stored them; return how many records were appended.

        Offsets and leader epochs are kept; the first batch must start at the log end and each
        next one right after its predecessor (CorruptRecordError otherwise, nothing written).
        Producer state is updated from the batches, so a retried batch is still recognised
        after this replica becomes leader. Under ``BROKER_FSYNC=always`` returns once synced,
        so the fetch offset a follower reports next counts only synced data.
        """
        if not data:
            return 0
        buf = data  # written as it is: a follower stamps nothing into its batches
        batches = list(iter_batches(buf))
        async with self.lock:
            if self.closed:
                raise self._closed_error()
            expected: int = self.log_end_offset
            writes: list[tuple[int, int, int]] = []
            records = 0
            for i, (_pos, header) in enumerate(batches):
                if header.base_offset != expected:
                    raise CorruptRecordError(
                        f"replicated batch {i} of {self.topic}-{self.partition} starts at offset "
                        f"{header.base_offset}, expected {expected}"
                    )
                writes.append((i, header.base_offset, header.max_timestamp))
                expected = header.last_offset + 1
                records += header.records_count
            self._write(buf, batches, writes, now_ms, follower=True)
            written = self.log_end_offset
        if self.fsync == "always":
            await self._sync_until(written)
        return records

    async def sync_written(self) -> None:
        """Under ``BROKER_FSYNC=always``, return once every written batch is fdatasynced (at
        once under the other policies).

        A follower calls it before it reports its log end as its fetch offset: the leader counts
        that offset towards the high watermark, so it must be durable. Batches written by an
        apply or an append whose sync is still in flight -- a fetcher replaced for a new leader,
        a leader's append when it becomes a follower -- are not yet.
        """
        if self.fsync == "always":
            await self._sync_until(self.log_end_offset)

    async def _sync_until(self, offset: int) -> None:
        """Return once everything below ``offset`` is fdatasynced and counted as local end."""
        while self.local_end_offset < offset:
            if self._sync_task is None:
                self._sync_task = asyncio.create_task(self._sync())
            await asyncio.shield(self._sync_task)

    async def _sync(self) -> None:
        """One fdatasync of the active segment covering every byte written so far."""
        segment, end = self.active, self.log_end_offset
        try:
            await asyncio.to_thread(segment.flush)
        except OSError as exc:
            # Not acknowledged and not visible; a later successful sync covers these bytes.
            raise StorageError(f"fsync of {segment.log_path}: {exc}") from exc
        finally:
            self._sync_task = None
        self._publish(end)

    def closed_error(self) -> BrokerError:
        """What a request to this log gets once it is closed (40401 when deleted, else 50003)."""
        return self._closed_error()

    def _closed_error(self) -> BrokerError:
        if self.deleted:
            return TopicNotFoundError(f"Topic '{self.topic}' was deleted")
        return StorageError(f"Partition {self.topic}-{self.partition} is closed")

    def _plan(
        self, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> tuple[list[AppendResult], list[tuple[int, int, int]]]:
        """Judge producer state and assign offsets without changing anything.

        Returns the results and ``(batch index, base offset, max timestamp)`` per batch to write.
        """
        pending: dict[int, ProducerEntry] = {}
        results: list[AppendResult] = []
        writes: list[tuple[int, int, int]] = []
        next_offset: int = self.log_end_offset
        append_time = now_ms if self.config.log_append_time else -1
        for i, (_pos, header) in enumerate(batches):
            pid = header.producer_id
            if pid >= 0:
                stored = self.producers.check(
                    pending, pid, header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if stored is not None:
                    first, final = Offset(stored.base_offset), Offset(stored.last_offset)
                    results.append(AppendResult(first, final, TimestampMs(-1), True))
                    continue
                last = next_offset + header.last_offset_delta
                self.producers.pending_update(
                    pending,
                    pid,
                    header.producer_epoch,
                    StoredBatch(header.base_sequence, header.last_sequence, next_offset, last),
                    now_ms,
                )
            last = next_offset + header.last_offset_delta
            max_ts = append_time if append_time >= 0 else header.max_timestamp
            writes.append((i, next_offset, max_ts))
            results.append(
                AppendResult(Offset(next_offset), Offset(last), TimestampMs(append_time), False)
            )
            next_offset = last + 1
        return results, writes

    def _write(
        self,
        buf: Buffer,
        batches: list[tuple[int, BatchHeader]],
        writes: list[tuple[int, int, int]],
        now_ms: int,
        *,
        leader_epoch: int = -1,
        follower: bool = False,
    ) -> None:
        """Stamp offsets into ``buf`` and write it in as few ``pwritev`` calls as segments allow.

        A ``follower`` write keeps the batches as they are (``buf`` may then be read-only) and
        records their leader epochs; any other write needs a ``bytearray`` to stamp.
        """
        if not follower and not isinstance(buf, bytearray):
            raise TypeError("a leader's append stamps its batches: pass a bytearray")
        config = self.config
        view = memoryview(buf)
        if self.active.size and now_ms - self.active.created_ms > config.segment_ms:
            self._roll(now_ms)
        if not self.active.size:
            self.active.created_ms = now_ms  # segment.ms counts from the first append
        chunks: list[memoryview] = []
        accounted: list[WrittenBatch] = []
        pending: dict[int, ProducerEntry] = {}
        run_bytes = 0
        chunk_start = chunk_end = -1
        for i, base, max_ts in writes:
            pos, header = batches[i]
            size = header.size
            segment = self.active
            if (segment.size or run_bytes) and (
                segment.size + run_bytes + size > config.segment_bytes
                or segment.is_index_full(config.segment_index_bytes)
            ):
                if chunk_end > chunk_start:
                    chunks.append(view[chunk_start:chunk_end])
                self._flush_run(chunks, accounted, pending)
                chunks, accounted, run_bytes = [], [], 0
                chunk_start = chunk_end = -1
                self._roll(now_ms)
            if follower:
                self._assign_epoch(header.partition_leader_epoch, base)
            elif isinstance(buf, bytearray):  # always, checked above
                set_base_offset(buf, pos, base)
                if leader_epoch >= 0:
                    set_partition_leader_epoch(buf, pos, leader_epoch)
                if config.log_append_time:
                    set_log_append_time(buf, pos, now_ms)
            if pos != chunk_end:
                if chunk_end > chunk_start:
                    chunks.append(view[chunk_start:chunk_end])
                chunk_start = pos
                if len(chunks) >= _MAX_IOV:
                    self._flush_run(chunks, accounted, pending)
                    chunks, accounted, run_bytes = [], [], 0
            chunk_end = pos + size
            last = base + header.last_offset_delta
            accounted.append(WrittenBatch(run_bytes, size, base, last, max_ts))
            run_bytes += size
            if header.producer_id >= 0:
                self.producers.pending_update(
                    pending,
                    header.producer_id,
                    header.producer_epoch,
                    StoredBatch(header.base_sequence, header.last_sequence, base, last),
                    now_ms,
                )
        if chunk_end > chunk_start:
            chunks.append(view[chunk_start:chunk_end])
        self._flush_run(chunks, accounted, pending)

    def _flush_run(
        self,
        chunks: list[memoryview],
        accounted: list[WrittenBatch],
        pending: dict[int, ProducerEntry],
    ) -> None:
        if not chunks:
            return
        self.active.append(chunks, accounted, self.config.index_interval_bytes)
        self.log_end_offset = Offset(self.active.next_offset)
        self._wake_end_waiters()
        # Batches now in the file are part of the log whatever happens next: commit their state.
        self.producers.commit(pending)
        pending.clear()
        if self.fsync != "always":
            self._publish(self.log_end_offset)

    def _roll(self, now_ms: int) -> None:
        """Close the active segment and start a new one at the log end offset.

        A failed write (a full disk) is a ``StorageError`` (50003), never a bare ``OSError``
        answered as an internal error; the active segment stays as it was.
        """
        old = self.active
        sync = self.fsync != "never"
        try:
            old.flush()
            old.write_indexes()
            self.producers.write_snapshot(self.directory, self.log_end_offset, sync=sync)
            self._prune_snapshots()
            segment = Segment.create(self.directory, self.log_end_offset)
        except OSError as exc:
            raise StorageError(
                f"rolling a segment of {self.topic}-{self.partition}: {exc}"
            ) from exc
        segment.created_ms = now_ms
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        if sync:
            fsync_directory(self.directory)

    def _prune_snapshots(self, keep: int = 2) -> None:
        for offset in snapshot_offsets(self.directory)[:-keep]:
            (self.directory / f"{offset:020d}.snapshot").unlink(missing_ok=True)

    def _publish(self, offset: int) -> None:
        """Count offsets below ``offset`` as this replica's; unreplicated, make them readable."""
        if offset > self.local_end_offset:
            self.local_end_offset = Offset(offset)
        if not self.replicated:
            self._set_high_watermark(offset)

    def _set_high_watermark(self, offset: int) -> None:
        if offset <= self.high_watermark:
            return
        self.high_watermark = Offset(offset)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_end_waiters(self) -> None:
        waiter, self._end_waiter = self._end_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- replication: high watermark and truncation ------------------------------------------

    def set_replicated(self, replicated: bool) -> None:
        """Hand the high watermark to replication (True) or back to appends (False).

        Turning replication off makes everything this replica holds readable at once (a single
        replica's high watermark is its local end).
        """
        self.replicated = replicated
        if not replicated:
            self._set_high_watermark(self.local_end_offset)

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset`` (never past the local log end); True if it
        moved. Wakes consumers long-polling for new records."""
        target = min(offset, self.log_end_offset)
        if target <= self.high_watermark:
            return False
        self._set_high_watermark(target)
        return True

    async def truncate_to(self, offset: int) -> Offset:
        """Cut the log so that it ends at ``offset``; return the new log end offset.

        Whole batches are removed: a batch containing ``offset`` goes too, so the new end may be
        lower. Segments after the cut are deleted, the one holding it is cut and becomes active
        (its indexes rebuilt), leader epochs starting at or after the end are forgotten, and
        producer state is rebuilt from the remaining log. Below the log start offset the log
        is emptied and restarted at ``offset``. Durable (fsync) before returning.
        """
        async with self.lock:
            if self.closed:
                raise self._closed_error()
            await self._idle_sync()
            if offset >= self.log_end_offset:
                # Nothing to cut, but an epoch that wrote nothing here (this replica led
                # briefly) must go, or the next fetch would name it again.
                self.epochs.truncate_from_end(offset)
                return self.log_end_offset
            if offset < self.log_start_offset:
                self._restart_at(offset)
                return self.log_end_offset
            try:
                self._truncate(offset)
            except OSError as exc:
                raise StorageError(
                    f"truncating {self.topic}-{self.partition} to {offset}: {exc}"
                ) from exc
            return self.log_end_offset

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (a follower whose log
        ends before the leader's log start)."""
        async with self.lock:
            if self.closed:
                raise self._closed_error()
            await self._idle_sync()
            try:
                self._restart_at(offset)
            except OSError as exc:
                raise StorageError(
                    f"restarting {self.topic}-{self.partition} at {offset}: {exc}"
                ) from exc

    async def _idle_sync(self) -> None:
        """Wait for an fdatasync in flight (it uses the active segment's descriptor)."""
        task = self._sync_task
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)

    def _truncate(self, offset: int) -> None:
        before = self.log_end_offset
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        # Newest first: a crash part-way leaves a shorter but gapless log.
        for segment in reversed(self.segments[i + 1 :]):
            segment.delete()
        keep = self.segments[i]
        found = keep.find(offset)
        if found is not None:
            keep.truncate(found[0], self.config.index_interval_bytes)
        self.segments = self.segments[: i + 1]
        self._bases = self._bases[: i + 1]
        fsync_directory(self.directory)
        self._after_cut(Offset(keep.next_offset))
        log.warning(
            "truncated %s-%d from log end %d to %d",
            self.topic,
            self.partition,
            before,
            self.log_end_offset,
            extra={"truncated_records": before - self.log_end_offset},
        )

    def _restart_at(self, offset: int) -> None:
        for segment in reversed(self.segments):
            segment.delete()
        for snapshot in snapshot_offsets(self.directory):
            (self.directory / f"{snapshot:020d}.snapshot").unlink(missing_ok=True)
        segment = Segment.create(self.directory, offset)
        self.segments = [segment]
        self._bases = [offset]
        self.log_start_offset = Offset(offset)
        self._write_log_start()
        self.epochs.clear()
        self.log_end_offset = self.local_end_offset = Offset(offset)
        self.high_watermark = Offset(offset)
        self.producers = ProducerStateTable()
        self.checkpoint_high_watermark()
        log.warning("restarted %s-%d empty at offset %d", self.topic, self.partition, offset)

    def _after_cut(self, end: Offset) -> None:
        self.log_end_offset = end
        self.local_end_offset = Offset(min(self.local_end_offset, end))
        if self.high_watermark > end:
            self.high_watermark = end
        self.epochs.truncate_from_end(end)
        self._recover_producers()

    def flush(self) -> None:
        """fdatasync the active segment (interval policy; closed segments were synced on roll).

        A failed fdatasync is a failed disk whichever policy found it: StorageError caused by
        the OSError (``is_disk_failure``), as under ``always``. A closed log has nothing to sync.
        """
        if self.closed:
            return
        segment = self.active
        try:
            segment.flush()
        except OSError as exc:
            raise StorageError(f"fsync of {segment.log_path}: {exc}") from exc

    # --- reading -----------------------------------------------------------------------------

    def check_offset(self, offset: int, upper_bound: int | None = None) -> None:
        """OffsetOutOfRangeError unless log start <= ``offset`` <= the readable end.

        The readable end is ``upper_bound`` when given, else the high watermark -- or, for a
        replicated partition, the log end: a consumer ahead of a new leader's high watermark
        waits for it rather than being told its offset is invalid.
        """
        start = self.log_start_offset
        if upper_bound is not None:
            end = upper_bound
        else:
            end = self.log_end_offset if self.replicated else self.high_watermark
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for partition {self.topic}-{self.partition}: "
                f"valid range is [{start}, {end}]"
            )

    def read(self, offset: int, max_bytes: int, *, upper_bound: int | None = None) -> FetchData:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (at least one).

        Batches at or past the high watermark are not returned, unless ``upper_bound`` (a
        follower's fetch: the log end offset) says how far to read instead.
        """
        self.check_offset(offset, upper_bound)
        hw = self.high_watermark
        empty = FetchData(b"", 0, Offset(offset), hw, self.log_start_offset)
        if upper_bound is not None:
            hw = Offset(upper_bound)
        if offset >= hw:
            return empty
        i = bisect.bisect_right(self._bases, offset) - 1
        for segment in self.segments[max(i, 0) :]:
            found = segment.find(offset)
            if found is None:
                continue
            position, _header = found
            data = segment.read(position, max(min(max_bytes, segment.size - position), HEADER_SIZE))
            pos = records = 0
            next_offset = offset
            while pos + HEADER_SIZE <= len(data):
                header = parse_header(data, pos)
                if header.base_offset >= hw:
                    break
                if pos + header.size > len(data):
                    if pos == 0:  # the first batch alone is larger than max_bytes: send it whole
                        data = segment.read(position, header.size)
                        pos = header.size
                        records = header.records_count
                        next_offset = header.last_offset + 1
                    break
                pos += header.size
                records += header.records_count
                next_offset = header.last_offset + 1
            if pos == 0:
                return empty
            return FetchData(
                data if pos == len(data) else data[:pos],
                records,
                Offset(next_offset),
                hw,
                self.log_start_offset,
            )
        return empty

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        """Return when the high watermark passes ``offset`` or after ``timeout_s``."""
        if offset < self.high_watermark or timeout_s <= 0 or self.closed:
            return
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._waiter), timeout_s)

    def wake_waiters(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._wake_end_waiters()

    def end_changed(self) -> asyncio.Future[None]:
        """A future completed when the log end offset next moves (or the log closes)."""
        if self._end_waiter is None or self._end_waiter.done():
            self._end_waiter = asyncio.get_running_loop().create_future()
            if self.closed:
                self._end_waiter.set_result(None)
        return self._end_waiter

    async def wait_for_end(self, offset: int, timeout_s: float) -> None:
        """Return when the log end offset passes ``offset`` or after ``timeout_s`` (followers)."""
        if offset < self.log_end_offset or timeout_s <= 0 or self.closed:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.end_changed()), timeout_s)

    def lookup_timestamp(self, timestamp: int) -> tuple[Offset, TimestampMs] | None:
        """The earliest offset whose record timestamp is >= ``timestamp``, and that timestamp."""
        hw = self.high_watermark
        for segment in self.segments:
            if segment.max_timestamp < timestamp or segment.base_offset >= hw:
                continue
            after = segment.time_index.lookup(timestamp)
            start = max(after + 1, segment.base_offset)
            found = segment.find(start)
            if found is None:
                continue
            for position, header in segment.headers(found[0]):
                if header.base_offset >= hw:
                    return None
                if header.max_timestamp < timestamp:
                    continue
                _h, records = decode_batch(segment.read(position, header.size))
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return Offset(record.offset), TimestampMs(record.timestamp)
        return None

    # --- retention and lifecycle -------------------------------------------------------------

    def _expired(self, now_ms: int) -> int:
        """How many leading segments retention deletes now (the active one only if non-empty)."""
        config = self.config
        segments = [s for s in self.segments if s.size or s is not self.active]
        count = 0
        if config.retention_ms >= 0:
            for segment in segments:
                newest = segment.max_timestamp
                if newest < 0:
                    newest = int(os.stat(segment.log_path).st_mtime * 1000)
                if now_ms - newest <= config.retention_ms:
                    break
                count += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[count:]) - config.retention_bytes
            for segment in segments[count:]:
                if excess - segment.size < 0:
                    break
                excess -= segment.size
                count += 1
        return count

    async def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past ``retention.ms`` / ``retention.bytes``; return how many."""
        async with self.lock:
            if self.closed:
                return 0
            count = self._expired(now_ms)
            if count == 0:
                return 0
            if count >= len(self.segments):
                self._roll(now_ms)  # never delete the active segment: keep the log end offset
            doomed, self.segments = self.segments[:count], self.segments[count:]
            self._bases = self._bases[count:]
            self.log_start_offset = Offset(max(self.log_start_offset, self.segments[0].base_offset))
            self._write_log_start()
            self.epochs.truncate_from_start(self.log_start_offset)
            for segment in doomed:
                segment.delete()
            log.info(
                "retention deleted %d segment(s) of %s-%d; log start offset now %d",
                count,
                self.topic,
                self.partition,
                self.log_start_offset,
            )
            return count

    def close(self) -> None:
        """Persist indexes and producer state, and close files (clean shutdown)."""
        if self.closed:
            return
        self.closed = True
        self.wake_waiters()
        with contextlib.suppress(OSError):
            self.active.flush()
            self.active.write_indexes()
            self.producers.write_snapshot(self.directory, self.log_end_offset, sync=True)
            self._prune_snapshots()
            if self.replicated:
                self.checkpoint_high_watermark()
        for segment in self.segments:
            segment.close()

    async def delete(self) -> Path | None:
        """Close the partition for good and move its directory aside (topic deletion).

        Waits for an append in progress. Returns the renamed directory for the caller to
        remove once the catalog no longer lists the topic (``*.deleted`` leftovers are removed
        on start).
        """
        async with self.lock:
            self.closed = self.deleted = True
            self.wake_waiters()
            for segment in self.segments:
                segment.close()
            target = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}.deleted")
            try:
                self.directory.rename(target)
            except FileNotFoundError:
                return None
            return target
