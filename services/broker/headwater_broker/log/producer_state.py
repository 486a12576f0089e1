"""Idempotent-producer state of one partition: the last batches of each producer, and snapshots.

For each producer id the partition keeps its epoch and the sequence range and offsets of its last
five batches (Kafka's window: a producer has at most five requests in flight). An incoming batch is
judged against them: a retry of a stored batch is a duplicate answered with its original offsets;
anything but the next sequence is a gap; an older epoch is fenced.

Snapshot files ``<offset 20 digits>.snapshot`` hold the table as of that offset (JSON)::

    {"offset": 4711,
     "producers": {"<id>": [epoch, last_timestamp_ms,
                            [[first_seq, last_seq, base_offset, last_offset], ...]]}}

One is written when a segment rolls and when the broker shuts down. Recovery loads the newest
snapshot at or below the log end offset and replays the batch headers after it, so the state
survives restarts and crashes without reading any record.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from headwater.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from headwater.records.batch import BatchHeader

WINDOW = 5
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """Sequence range and offsets of one batch a producer wrote."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """What a partition remembers of one producer."""

    epoch: int
    last_timestamp: int
    batches: deque[StoredBatch] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.epoch, self.last_timestamp, deque(self.batches, maxlen=WINDOW))


def _next_seq(seq: int) -> int:
    return 0 if seq == _INT32_MAX else seq + 1


class ProducerStateTable:
    """Per-producer entries of one partition, with the duplicate / gap / epoch rules."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(
        self,
        pending: dict[int, ProducerEntry],
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
    ) -> StoredBatch | None:
        """Judge a batch; return the stored batch it duplicates, or None if it is the next one.

        ``pending`` holds entries updated by earlier batches of the same request, not yet
        committed. Raises OutOfOrderSequenceError for a gap, InvalidProducerEpochError when fenced.
        """
        entry = pending.get(producer_id) or self.entries.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is older than the current epoch "
                f"{entry.epoch}: this producer has been fenced"
            )
        if entry is None or epoch > entry.epoch or not entry.batches:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"Producer {producer_id} epoch {epoch}: expected sequence 0 for its first "
                    f"batch on this partition, got {first_seq}"
                )
            return None
        for stored in entry.batches:
            if stored.first_seq == first_seq and stored.last_seq == last_seq:
                return stored
        expected = _next_seq(entry.batches[-1].last_seq)
        if first_seq != expected:
            raise OutOfOrderSequenceError(
                f"Producer {producer_id} epoch {epoch}: expected sequence {expected}, got "
                f"{first_seq} (last stored batch {entry.batches[-1].first_seq}.."
                f"{entry.batches[-1].last_seq})"
            )
        return None

    def pending_update(
        self,
        pending: dict[int, ProducerEntry],
        producer_id: int,
        epoch: int,
        batch: StoredBatch,
        timestamp: int,
    ) -> None:
        entry = pending.get(producer_id)
        if entry is None:
            current = self.entries.get(producer_id)
            entry = current.copy() if current is not None else ProducerEntry(epoch, timestamp)
            pending[producer_id] = entry
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(batch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def commit(self, pending: dict[int, ProducerEntry]) -> None:
        self.entries.update(pending)

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Apply stored batches' headers in log order (recovery), without judging them."""
        pending: dict[int, ProducerEntry] = {}
        for header in headers:
            if header.producer_id < 0 or header.base_sequence < 0:
                continue
            stored = StoredBatch(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset
            )
            self.pending_update(
                pending, header.producer_id, header.producer_epoch, stored, header.max_timestamp
            )
        self.commit(pending)

    def expire(
        self, now_ms: int, expiration_ms: int, only: Callable[[int], bool] | None = None
    ) -> list[int]:
        """Forget producers whose last batch here is older than ``expiration_ms`` (among the
        ids ``only`` accepts, when given)."""
        gone = [
            pid
            for pid, entry in self.entries.items()
            if now_ms - entry.last_timestamp > expiration_ms and (only is None or only(pid))
        ]
        for pid in gone:
            del self.entries[pid]
        return gone

    # --- snapshots ---------------------------------------------------------------------------

    def write_snapshot(self, directory: Path, offset: int, *, sync: bool) -> Path:
        body = {
            "offset": offset,
            "producers": {
                str(pid): [
                    e.epoch,
                    e.last_timestamp,
                    [[b.first_seq, b.last_seq, b.base_offset, b.last_offset] for b in e.batches],
                ]
                for pid, e in self.entries.items()
            },
        }
        path = directory / f"{offset:020d}.snapshot"
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(body))
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @classmethod
    def load_snapshot(cls, path: Path) -> tuple[ProducerStateTable, int] | None:
        """The table and offset in a snapshot file, or None if it is unreadable."""
        try:
            body = orjson.loads(path.read_bytes())
            table = cls()
            for pid, (epoch, last_ts, batches) in body["producers"].items():
                entry = ProducerEntry(int(epoch), int(last_ts))
                for first, last, base, end in batches:
                    entry.batches.append(StoredBatch(int(first), int(last), int(base), int(end)))
                table.entries[int(pid)] = entry
            return table, int(body["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in a partition directory, ascending."""
    offsets = []
    for path in directory.glob("*.snapshot"):
        stem = path.name.removesuffix(".snapshot")
        if len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}.snapshot"


def recover_producers(
    directory: Path, log_end: int, headers_from: Callable[[int], Iterable[BatchHeader]]
) -> ProducerStateTable:
    """Producer state as of ``log_end``: the newest usable snapshot at or below it, then the
    batch headers after it (``headers_from(offset)``: the log's headers from ``offset`` on).
    Snapshots past the end describe batches a crash or a truncation cut off: they go."""
    table, start = ProducerStateTable(), -1
    for offset in reversed(snapshot_offsets(directory)):
        path = snapshot_path(directory, offset)
        if offset > log_end:
            path.unlink(missing_ok=True)
            continue
        if start < 0:
            loaded = ProducerStateTable.load_snapshot(path)
            if loaded is not None:
                table, start = loaded
    table.replay(headers_from(max(start, 0)))
    return table


def prune_snapshots(directory: Path, keep: int = 2) -> None:
    """Delete all but the newest ``keep`` snapshots (``keep=0``: all of them)."""
    offsets = snapshot_offsets(directory)
    for offset in offsets[: len(offsets) - keep]:
        snapshot_path(directory, offset).unlink(missing_ok=True)
