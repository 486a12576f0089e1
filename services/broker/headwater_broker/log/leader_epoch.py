"""The leader-epoch checkpoint of one partition: which leader epoch wrote from which offset on.

Each leader stamps its epoch into every batch it appends (the batch header's
``partitionLeaderEpoch``); this file records, per epoch, the first offset written under it, as
Kafka's ``LeaderEpochFileCache`` (KIP-101). Replicas compare these maps to find where their logs
diverge after a leader change and truncate exactly there, never to the high watermark.

File ``leader-epoch-checkpoint`` in the partition directory, Kafka's layout (decimal text)::

    0               version
    2               number of entries
    3 0             epoch start_offset, ascending in both
    5 1200

It is rewritten whole (temporary file, fsync, rename, fsync of the directory) on every change;
changes are rare (a new epoch, a truncation, retention). A file that is missing, unreadable or
inconsistent (entries not strictly ascending, a count that does not match) is not trusted: the
partition log rebuilds the map from its batch headers and writes it again.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from headwater.records.batch import BatchHeader

log = logging.getLogger("headwater.broker.leader_epoch")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader epoch ``epoch`` wrote its first batch at ``start_offset``."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Answer to "where does epoch *e* end in your log": the largest epoch <= e, its end.

    ``UNDEFINED_EPOCH`` / ``UNDEFINED_OFFSET`` when the log knows no such epoch.
    """

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.end_offset == UNDEFINED_OFFSET


class CorruptCheckpointError(ValueError):
    """The checkpoint file's contents are not a valid epoch map."""


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Entries of a checkpoint file's text; CorruptCheckpointError if it is not one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise CorruptCheckpointError("fewer than two lines (version and count)")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError as exc:
        raise CorruptCheckpointError(f"bad version or count line: {exc}") from None
    if version != _VERSION:
        raise CorruptCheckpointError(f"unknown version {version}")
    if count != len(lines) - 2:
        raise CorruptCheckpointError(f"count {count} but {len(lines) - 2} entries")
    entries: list[EpochEntry] = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            raise CorruptCheckpointError(f"entry {line!r} is not 'epoch start_offset'")
        try:
            entry = EpochEntry(int(parts[0]), int(parts[1]))
        except ValueError:
            raise CorruptCheckpointError(f"entry {line!r} is not two integers") from None
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CorruptCheckpointError(f"negative value in entry {line!r}")
        if entries and (
            entry.epoch <= entries[-1].epoch or entry.start_offset < entries[-1].start_offset
        ):
            raise CorruptCheckpointError(f"entry {line!r} does not follow {entries[-1]}")
        entries.append(entry)
    return entries


def format_checkpoint(entries: list[EpochEntry]) -> str:
    body = "".join(f"{e.epoch} {e.start_offset}\n" for e in entries)
    return f"{_VERSION}\n{len(entries)}\n{body}"


class LeaderEpochCache:
    """The epoch -> start offset map of a partition, kept in memory and in its checkpoint file.

    Epochs and start offsets both ascend (start offsets may repeat when an epoch wrote nothing:
    Kafka keeps only the later one, and so do we). ``directory=None`` keeps it in memory only.
    """

    def __init__(self, directory: Path | None, *, sync: bool = True) -> None:
        self.directory = directory
        self.sync = sync
        self._epochs: list[int] = []
        self._starts: list[int] = []

    # --- loading and saving ------------------------------------------------------------------

    @classmethod
    def load(cls, directory: Path, *, sync: bool = True) -> tuple[LeaderEpochCache, bool]:
        """The cache in ``directory`` and whether its file could be trusted.

        A missing file is trusted (empty map: a new partition, or one written before epochs);
        a damaged one is not, and the caller rebuilds the map from the log.
        """
        cache = cls(directory, sync=sync)
        path = directory / CHECKPOINT_FILE
        try:
            text = path.read_text()
        except FileNotFoundError:
            return cache, True
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s (%s): rebuilding it from the log", path, exc)
            return cache, False
        try:
            entries = parse_checkpoint(text)
        except CorruptCheckpointError as exc:
            log.warning("damaged %s (%s): rebuilding it from the log", path, exc)
            return cache, False
        for entry in entries:
            cache._epochs.append(entry.epoch)
            cache._starts.append(entry.start_offset)
        return cache, True

    def flush(self) -> None:
        """Write the map to its checkpoint file atomically."""
        if self.directory is None:
            return
        path = self.directory / CHECKPOINT_FILE
        tmp = path.with_name(CHECKPOINT_FILE + ".tmp")
        with open(tmp, "w") as f:
            f.write(format_checkpoint(self.entries()))
            if self.sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if self.sync:
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # --- reading -----------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True)]

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote ``offset`` (UNDEFINED_EPOCH before the first entry)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """The largest epoch <= ``requested_epoch`` and the offset where it ends (KIP-101/279).

        As Kafka's ``LeaderEpochFileCache.endOffsetFor``: the requested epoch is the latest ->
        the log end offset; otherwise the end is the start offset of the first epoch after the
        requested one, and the epoch returned is the largest one <= requested (the requested
        epoch itself when it precedes every entry). Undefined when the requested epoch is
        undefined or later than every entry.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        if requested_epoch == self._epochs[-1]:
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        end = self._starts[higher]
        if higher == 0:
            return EpochEndOffset(requested_epoch, end)
        return EpochEndOffset(self._epochs[higher - 1], end)

    # --- changing ----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the map changed.

        A no-op for an undefined epoch or when the latest entry already is this epoch from an
        earlier or equal offset. Otherwise every entry with an epoch >= ``epoch`` or a start
        offset >= ``start_offset`` is removed first (it describes a tail that no longer exists),
        so the map stays ascending in both.
        """
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if removed:
            log.info(
                "leader epoch %d at offset %d replaces entries %s in %s",
                epoch,
                start_offset,
                removed,
                self.directory,
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> bool:
        """Forget epochs that start at or after ``end_offset`` (the log was cut there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return False
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:]
        del self._starts[keep:]
        if flush:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> bool:
        """Forget what precedes ``start_offset`` (the log start moved there).

        The epoch covering ``start_offset`` is kept and moved to start there, as Kafka's.
        """
        if start_offset < 0 or not self._starts or self._starts[0] >= start_offset:
            return False
        covering = bisect.bisect_right(self._starts, start_offset) - 1
        del self._epochs[:covering]
        del self._starts[:covering]
        self._starts[0] = start_offset
        if flush:
            self.flush()
        return True

    def clear(self, *, flush: bool = True) -> None:
        self._epochs.clear()
        self._starts.clear()
        if flush:
            self.flush()

    @classmethod
    def recover(
        cls,
        directory: Path,
        *,
        sync: bool,
        closed_headers: Iterable[BatchHeader],
        active_headers: list[BatchHeader],
        log_start: int,
        log_end: int,
    ) -> LeaderEpochCache:
        """The checkpoint as of a log recovered from a crash: loaded (rebuilt from the closed
        segments' ``closed_headers`` if it is damaged), cut to the log's bounds, and completed
        with the active segment's newer epochs; written back if anything changed."""
        epochs, trusted = cls.load(directory, sync=sync)
        changed = False
        if not trusted:
            for header in closed_headers:
                changed |= epochs.assign(
                    header.partition_leader_epoch, header.base_offset, flush=False
                )
            changed = True
        # Entries past the recovered end describe batches the crash cut off; the active
        # segment's epochs may postdate the last checkpoint write (a crash). As Kafka's segment
        # recovery, only an epoch newer than the latest known is assigned: assigning an older
        # one would remove every entry from that epoch on, so a checkpoint [(1, 0), (2, 6)]
        # over an active segment starting with an epoch-1 batch at 5 became [(1, 5)].
        changed |= epochs.truncate_from_end(log_end, flush=False)
        for header in active_headers:
            if header.partition_leader_epoch > epochs.latest_epoch:
                changed |= epochs.assign(
                    header.partition_leader_epoch, header.base_offset, flush=False
                )
        changed |= epochs.truncate_from_start(log_start, flush=False)
        if changed:
            epochs.flush()
        return epochs
