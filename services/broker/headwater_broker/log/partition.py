"""One partition replica: offset assignment, the high watermark, leader epochs and producer state
over its local log.

The segments themselves -- recovery, reads, rolling, truncation and retention on disk -- are the
local log's (``local_log.py``, as Kafka's ``LocalLog`` under ``UnifiedLog``); this module keeps
the state above them and the rules that tie the two: producer sequences judged before a write,
epochs recorded as batches land, group commit under ``BROKER_FSYNC=always``, and after any cut
the epochs and producer state rebuilt from what remains. Offsets start at 0, only grow and are
never reused.

The high watermark and this replica's own end for it: ``watermarks.py``.

A leader stamps its leader epoch into every batch it appends and records each new epoch's first
offset (leader_epoch.py); a follower appends the leader's batches unchanged
(``append_as_follower``); ``truncate_to`` cuts a divergent tail.

What runs on the event loop, what in threads, and how appends are serialised and synced: the
threading policy in ``headwater_broker.broker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from headwater.errors import (
    BrokerError,
    CorruptRecordError,
    OffsetOutOfRangeError,
    StorageError,
    TopicNotFoundError,
)
from headwater.records.batch import (
    BatchHeader,
    Buffer,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from headwater.types import Offset, PartitionId, TimestampMs
from headwater_broker.log.leader_epoch import LeaderEpochCache
from headwater_broker.log.local_log import FetchData, FsyncPolicy, GroupCommit, LocalLog
from headwater_broker.log.producer_state import (
    ProducerEntry,
    ProducerStateTable,
    StoredBatch,
    prune_snapshots,
    recover_producers,
)
from headwater_broker.log.segment import WrittenBatch
from headwater_broker.log.watermarks import Watermarks
from headwater_broker.topic_config import TopicConfig

log = logging.getLogger("headwater.broker.partition")

_MAX_IOV = 512  # stay well below IOV_MAX (1024) for one pwritev


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where one batch of an append request landed."""

    base_offset: Offset
    last_offset: Offset
    log_append_time: TimestampMs  # -1 unless the topic uses LogAppendTime
    duplicate: bool


class PartitionLog:
    """One topic partition's replica: its local log and the state above it."""

    def __init__(self, local: LocalLog, fsync: FsyncPolicy) -> None:
        self.local = local
        self.directory = local.directory
        self.topic = local.topic
        self.partition = local.partition
        self.fsync = fsync
        self.marks = Watermarks(local.directory, sync=fsync != "never")
        self.epochs = LeaderEpochCache(local.directory, sync=fsync != "never")
        self.producers = ProducerStateTable()
        self.lock = asyncio.Lock()
        self._commit = GroupCommit(local, self.marks.publish)
        self.closed = False
        self.deleted = False
        local.on_roll = self._snapshot_producers

    # --- the local log's facts ---------------------------------------------------------------

    @property
    def config(self) -> TopicConfig:
        """The topic's configs (``set_configs`` of the registry sets the local log's)."""
        return self.local.config

    @property
    def log_start_offset(self) -> Offset:
        return self.local.log_start_offset

    @property
    def high_watermark(self) -> Offset:
        """The next offset readers may see (``watermarks.py``)."""
        return self.marks.high_watermark

    @property
    def local_end_offset(self) -> Offset:
        return self.marks.local_end_offset

    @property
    def replicated(self) -> bool:
        return self.marks.replicated

    @property
    def log_end_offset(self) -> Offset:
        """The next offset to assign (every batch below it is written, maybe not yet synced)."""
        return self.local.log_end_offset

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
        local, active_headers = LocalLog.open(
            directory, topic, partition, config, sync=fsync != "never"
        )
        plog = cls(local, fsync)
        plog.marks.reset(local.log_end_offset)
        plog._recover_epochs(active_headers)
        plog._recover_producers(active_headers)
        plog.marks.replicated = replicated
        if replicated:
            checkpointed = min(plog.marks.read_checkpoint(), plog.log_end_offset)
            plog.marks.high_watermark = Offset(max(plog.log_start_offset, checkpointed))
        return plog

    def _recover_epochs(self, active_headers: list[BatchHeader]) -> None:
        self.epochs = LeaderEpochCache.recover(
            self.directory,
            sync=self.fsync != "never",
            closed_headers=self.local.headers(closed_only=True),
            active_headers=active_headers,
            log_start=self.log_start_offset,
            log_end=self.log_end_offset,
        )

    def _recover_producers(self, active_headers: list[BatchHeader] | None = None) -> None:
        """Producer state as of the log end: newest usable snapshot, then the headers after it."""
        active = active_headers
        if active is None:
            active = [h for _pos, h in self.local.active.headers()]

        def headers_from(start: int) -> Iterator[BatchHeader]:
            yield from self.local.headers(start, closed_only=True)
            yield from (h for h in active if h.base_offset >= start)

        self.producers = recover_producers(self.directory, self.log_end_offset, headers_from)

    def _snapshot_producers(self, end: Offset) -> None:
        """Write producer state at ``end`` (a segment rolls there), keep the newest two."""
        self.producers.write_snapshot(self.directory, end, sync=self.fsync != "never")
        prune_snapshots(self.directory)

    def checkpoint_high_watermark(self) -> bool:
        """Checkpoint the high watermark if it moved (``Watermarks.checkpoint``)."""
        return self.marks.checkpoint()

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
                raise self.closed_error()
            if guard is not None:
                guard()
            results, writes = self._plan(batches, now_ms)
            if writes:
                if leader_epoch >= 0:
                    self._assign_epoch(leader_epoch, writes[0][1])
                self._write(buf, batches, writes, now_ms, leader_epoch=leader_epoch)
            written = self.log_end_offset
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
                raise self.closed_error()
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
        await self._sync_until(self.log_end_offset)

    async def _sync_until(self, offset: int) -> None:
        """Under ``always``, return once everything below ``offset`` is fdatasynced and counted
        as local end (at once under the other policies)."""
        if self.fsync == "always":
            await self._commit.until(offset, lambda: self.local_end_offset)

    def closed_error(self) -> BrokerError:
        """What a request to this log gets once it is closed (40401 when deleted, else 50003)."""
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
        config, local = self.config, self.local
        view = memoryview(buf)
        local.roll_if_old(now_ms)
        chunks: list[memoryview] = []
        accounted: list[WrittenBatch] = []
        pending: dict[int, ProducerEntry] = {}
        run_bytes = 0
        chunk_start = chunk_end = -1
        for i, base, max_ts in writes:
            pos, header = batches[i]
            size = header.size
            if local.is_full_for(run_bytes, size):
                if chunk_end > chunk_start:
                    chunks.append(view[chunk_start:chunk_end])
                self._flush_run(chunks, accounted, pending)
                chunks, accounted, run_bytes = [], [], 0
                chunk_start = chunk_end = -1
                local.roll(now_ms)
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
        self.local.write(chunks, accounted)
        self.marks.end_moved.fire()
        # Batches now in the file are part of the log whatever happens next: commit their state.
        self.producers.commit(pending)
        pending.clear()
        if self.fsync != "always":
            self.marks.publish(self.log_end_offset)

    # --- replication: high watermark and truncation ------------------------------------------

    def set_replicated(self, replicated: bool) -> None:
        self.marks.set_replicated(replicated)

    def advance_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset`` (never past the log end); True if it moved.
        Wakes consumers long-polling for new records."""
        return self.marks.advance(offset, self.log_end_offset)

    async def truncate_to(self, offset: int) -> Offset:
        """Cut the log so that it ends at ``offset``; return the new log end offset.

        Whole batches are removed: a batch containing ``offset`` goes too, so the new end may be
        lower. Segments after the cut are deleted, the one holding it is cut and becomes active
        (its indexes rebuilt), leader epochs starting at or after the end are forgotten, and
        producer state is rebuilt from the remaining log. Below the log start offset the log
        is emptied and restarted at ``offset``. Durable (fsync) before returning.
        """
        async with self._cutting(f"truncating {self.topic}-{self.partition} to {offset}"):
            if offset >= self.log_end_offset:
                # Nothing to cut, but an epoch that wrote nothing here (this replica led
                # briefly) must go, or the next fetch would name it again.
                self.epochs.truncate_from_end(offset)
            elif offset < self.log_start_offset:
                self._restart_at(offset)
            else:
                self._truncate(offset)
            return self.log_end_offset

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (a follower whose log
        ends before the leader's log start)."""
        async with self._cutting(f"restarting {self.topic}-{self.partition} at {offset}"):
            self._restart_at(offset)

    @contextlib.asynccontextmanager
    async def _cutting(self, what: str) -> AsyncIterator[None]:
        """Under the lock, with no sync in flight (it uses the active segment's descriptor); a
        failed write on the way is a StorageError, as every other one."""
        async with self.lock:
            if self.closed:
                raise self.closed_error()
            await self._commit.idle()
            try:
                yield
            except OSError as exc:
                raise StorageError(f"{what}: {exc}") from exc

    def _truncate(self, offset: int) -> None:
        before = self.log_end_offset
        self._after_cut(self.local.truncate(offset))
        log.warning(
            "truncated %s-%d from log end %d to %d",
            self.topic,
            self.partition,
            before,
            self.log_end_offset,
            extra={"truncated_records": before - self.log_end_offset},
        )

    def _restart_at(self, offset: int) -> None:
        self.local.restart_at(offset)
        prune_snapshots(self.directory, keep=0)
        self.epochs.clear()
        self.marks.reset(offset)
        self.producers = ProducerStateTable()
        self.checkpoint_high_watermark()
        log.warning("restarted %s-%d empty at offset %d", self.topic, self.partition, offset)

    def _after_cut(self, end: Offset) -> None:
        self.marks.cut(end)
        self.epochs.truncate_from_end(end)
        self._recover_producers()

    def flush(self) -> None:
        """fdatasync the active segment (interval policy; closed segments were synced on roll).

        A failed fdatasync is a failed disk whichever policy found it: StorageError caused by
        the OSError (``is_disk_failure``), as under ``always``. A closed log has nothing to sync.
        """
        if not self.closed:
            self.local.flush()

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
        below = hw if upper_bound is None else Offset(upper_bound)
        if offset >= below:
            return FetchData(b"", 0, Offset(offset), hw, self.log_start_offset)
        data, records, next_offset = self.local.read(offset, max_bytes, below)
        if not data:
            return FetchData(b"", 0, Offset(offset), hw, self.log_start_offset)
        return FetchData(data, records, next_offset, below, self.log_start_offset)

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        """Return when the high watermark passes ``offset`` or after ``timeout_s``."""
        if offset < self.high_watermark or timeout_s <= 0 or self.closed:
            return
        await self.marks.hw_moved.wait(timeout_s)

    def wake_waiters(self) -> None:
        self.marks.wake()

    def end_changed(self) -> asyncio.Future[None]:
        """A future completed when the log end offset next moves (or the log closes)."""
        future = self.marks.end_moved.future()
        if self.closed:
            self.marks.end_moved.fire()
        return future

    async def wait_for_end(self, offset: int, timeout_s: float) -> None:
        """Return when the log end offset passes ``offset`` or after ``timeout_s`` (followers)."""
        if offset < self.log_end_offset or timeout_s <= 0 or self.closed:
            return
        await self.marks.end_moved.wait(timeout_s)

    def lookup_timestamp(self, timestamp: int) -> tuple[Offset, TimestampMs] | None:
        """The earliest offset whose record timestamp is >= ``timestamp``, and that timestamp."""
        return self.local.lookup_timestamp(timestamp, self.high_watermark)

    # --- retention and lifecycle -------------------------------------------------------------

    async def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past ``retention.ms`` / ``retention.bytes``; return how many."""
        async with self.lock:
            if self.closed:
                return 0
            count = self.local.expired(now_ms)
            if count == 0:
                return 0
            self.local.delete_oldest(count, now_ms)
            self.epochs.truncate_from_start(self.log_start_offset)
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

        def persist_state() -> None:
            self.producers.write_snapshot(self.directory, self.log_end_offset, sync=True)
            prune_snapshots(self.directory)
            if self.replicated:
                self.checkpoint_high_watermark()

        self.local.close(persist_state)

    async def delete(self) -> Path | None:
        """Close the partition for good and move its directory aside (topic deletion).

        Waits for an append in progress. Returns the renamed directory for the caller to
        remove once the catalog no longer lists the topic (``*.deleted`` leftovers are removed
        on start).
        """
        async with self.lock:
            self.closed = self.deleted = True
            self.wake_waiters()
            return self.local.move_aside()
