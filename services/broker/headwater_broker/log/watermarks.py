"""A replica's readable end: its high watermark, its own end for the high watermark, and the
long-polls waiting on either (docs/cluster.md, "Replication").

- ``local_end_offset``: what this replica counts as its own log end when the high watermark is
  computed -- every written batch, or under ``BROKER_FSYNC=always`` only the fsynced ones.
- ``high_watermark``: consumers read below it only. A partition that is not ``replicated`` (one
  replica, the behaviour before the cluster) moves it with ``local_end_offset``; a replicated one
  has it moved by the replication layer (:meth:`Watermarks.advance`: the lowest log end over the
  in-sync set) and checkpoints it in ``replication-offset-checkpoint``.

Both only move up, except when a log is cut (:meth:`Watermarks.cut`, :meth:`Watermarks.reset`).
"""

from __future__ import annotations

from pathlib import Path

from headwater.types import Offset
from headwater_broker.log.offset_file import read_offset, write_offset
from headwater_broker.log.signal import Signal

HIGH_WATERMARK_FILE = "replication-offset-checkpoint"


class Watermarks:
    def __init__(self, directory: Path, *, sync: bool) -> None:
        self.directory = directory
        self.sync = sync
        self.local_end_offset = Offset(0)
        self.high_watermark = Offset(0)
        self.replicated = False  # the high watermark is moved by replication, not by appends
        self.hw_moved = Signal()  # long-polling fetches wait for the high watermark to move
        self.end_moved = Signal()  # follower fetches at the leader wait for the log end
        self._checkpointed = -1

    def publish(self, offset: int) -> None:
        """Count offsets below ``offset`` as this replica's; unreplicated, make them readable."""
        if offset > self.local_end_offset:
            self.local_end_offset = Offset(offset)
        if not self.replicated:
            self.raise_to(offset)

    def raise_to(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = Offset(offset)
            self.hw_moved.fire()

    def set_replicated(self, replicated: bool) -> None:
        """Hand the high watermark to replication (True) or back to appends (False): turned off,
        everything this replica holds is readable at once (one replica's is its local end)."""
        self.replicated = replicated
        if not replicated:
            self.raise_to(self.local_end_offset)

    def advance(self, offset: int, log_end: int) -> bool:
        """Move the high watermark up to ``offset``, never past ``log_end``; True if it moved."""
        target = min(offset, log_end)
        if target <= self.high_watermark:
            return False
        self.raise_to(target)
        return True

    def cut(self, end: Offset) -> None:
        """The log now ends at ``end`` (a truncation): neither end may stay past it."""
        self.local_end_offset = Offset(min(self.local_end_offset, end))
        self.high_watermark = Offset(min(self.high_watermark, end))

    def reset(self, offset: int) -> None:
        """The log restarted empty at ``offset``."""
        self.local_end_offset = self.high_watermark = Offset(offset)

    def read_checkpoint(self) -> int:
        return read_offset(self.directory / HIGH_WATERMARK_FILE)

    def checkpoint(self) -> bool:
        """Write the high watermark to ``replication-offset-checkpoint`` if it moved; True if so.

        Atomic; fsynced unless the fsync policy is ``never``. A crash loses at most the
        movement since the last checkpoint: the high watermark only restarts lower, never
        higher than what replicas hold.
        """
        hw = self.high_watermark
        if hw == self._checkpointed or not self.directory.exists():
            return False
        write_offset(self.directory / HIGH_WATERMARK_FILE, hw, sync=self.sync)
        self._checkpointed = hw
        return True

    def wake(self) -> None:
        """Wake every long-poll now (a role change, a close: they look again)."""
        self.hw_moved.fire()
        self.end_moved.fire()
