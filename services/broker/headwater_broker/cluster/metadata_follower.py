"""Keeps a broker's metadata image current: a snapshot at start, then the change log, in order.

The follower polls ``changes WHERE offset > applied`` every poll interval, applies the rows to its
image (:meth:`MetadataImage.apply`) and tells its listeners what changed. When the rows it needs
were pruned, it reloads a snapshot and tells listeners ``ImageReloaded``. The image is replaced,
never mutated, and only on the event loop's thread; listeners run there too, synchronously, right
after the swap, and must not block (schedule work instead).

The controller of this broker commits its own changes through :meth:`MetadataFollower.advance`,
so its image reflects its writes at once instead of one poll later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from headwater.errors import MetadataUnavailableError
from headwater_broker.cluster.changes import Change
from headwater_broker.cluster.image import (
    ChangeGapError,
    ImageReloaded,
    MetadataEvent,
    MetadataImage,
)
from headwater_broker.cluster.state import ChangeOffset
from headwater_broker.cluster.store import MetadataStore

log = logging.getLogger("headwater.broker.cluster")

_MAX_UNAPPLIED = 64  # log ends remembered past the image (one per heartbeat or poll at most)

Listener = Callable[[MetadataImage, Sequence[MetadataEvent]], None]
"""Called with the new image and the events that led to it, in change order."""


class MetadataFollower:
    """One broker's current :class:`MetadataImage`, advanced from the change log."""

    def __init__(self, store: MetadataStore, poll_ms: int, *, batch: int = 1000) -> None:
        self.store = store
        self.poll_ms = poll_ms
        self.batch = batch
        self._image: MetadataImage | None = None
        self._listeners: list[Listener] = []
        self.last_poll_monotonic = 0.0
        """When the last poll answered: the image is at most this stale (plus one poll)."""
        # Ends of the change log seen (by polls and heartbeats) past the image, with when each
        # was first seen, oldest first: the image's lag is the age of the oldest.
        self._unapplied: deque[tuple[int, float]] = deque()

    @property
    def image(self) -> MetadataImage:
        if self._image is None:
            raise RuntimeError("the metadata image is not loaded yet: await load() first")
        return self._image

    @property
    def loaded(self) -> bool:
        return self._image is not None

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def saw_log_end(self, offset: int) -> None:
        """The change log reached ``offset`` (read from the store by a poll or a heartbeat)."""
        if offset <= self.image.offset or len(self._unapplied) >= _MAX_UNAPPLIED:
            return
        if not self._unapplied or offset > self._unapplied[-1][0]:
            self._unapplied.append((offset, time.monotonic()))

    def lag_ms(self) -> float:
        """How long the image has lacked a change that was in the log (0 when it has them all).

        A poll that applies what it read keeps this near zero; a follower that cannot poll
        while heartbeats still read the log's end (a session the server ended, a bug) lets it
        grow, and the broker stops acting as a leader past ``BROKER_METADATA_MAX_LAG_MS``.
        """
        applied = self.image.offset
        while self._unapplied and self._unapplied[0][0] <= applied:
            self._unapplied.popleft()
        if not self._unapplied:
            return 0.0
        return (time.monotonic() - self._unapplied[0][1]) * 1000

    async def load(self) -> MetadataImage:
        """Replace the image with a fresh snapshot."""
        before = self._image.offset if self._image is not None else 0
        image = await self.store.call(self.store.read_snapshot)
        self.last_poll_monotonic = time.monotonic()
        if self._image is not None and image.offset < self._image.offset:
            return self._image  # a slower concurrent read: never go backwards
        self._swap(image, [ImageReloaded(before_offset=ChangeOffset(before))])
        return image

    async def poll(self) -> int:
        """Read and apply the changes after the image's offset; return how many were applied."""
        total = 0
        while True:
            after = self.image.offset
            batch = await self.store.call(self.store.read_changes, after, self.batch)
            self.last_poll_monotonic = time.monotonic()
            self.saw_log_end(batch.last_change)
            rows = batch.changes
            pruned = (rows and rows[0].offset > after + 1) or (
                not rows and batch.last_change > after
            )
            if pruned:
                log.warning("metadata changes after %d were pruned; reloading a snapshot", after)
                await self.load()
                return total
            applied = await self.advance(rows)
            total += applied
            if len(rows) < self.batch:
                return total

    async def advance(self, changes: Sequence[Change]) -> int:
        """Apply changes read or written by this process (rows already applied are skipped)."""
        image = self.image
        try:
            new, events = image.apply(changes)
        except ChangeGapError:
            # A row between the image and these changes is missing: only a snapshot repairs it.
            await self.load()
            return 0
        if new is image:
            return 0
        self._swap(new, events)
        return len(events)

    def _swap(self, image: MetadataImage, events: Sequence[MetadataEvent]) -> None:
        self._image = image
        for listener in list(self._listeners):
            try:
                listener(image, events)
            except Exception:
                log.exception("metadata listener %r failed", listener)

    async def wait_for(self, offset: int, timeout_s: float) -> MetadataImage:
        """The image once it reflects change ``offset`` (polling now rather than next tick)."""
        deadline = time.monotonic() + timeout_s
        while self.image.offset < offset:
            await self.poll()
            if self.image.offset >= offset:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"metadata image at {self.image.offset}, waited for {offset}")
            await asyncio.sleep(min(remaining, self.poll_ms / 1000))
        return self.image

    async def run(self) -> None:
        """Poll forever. A failed poll -- a database outage, a session the server ended while
        this process was paused, or a bug -- leaves the image as it was and is retried after
        the poll interval; it is logged once per run of failures, never ends the loop."""
        failing = False
        while True:
            try:
                await self.poll()
                if failing:
                    log.info("metadata store answers again; image at change %d", self.image.offset)
                failing = False
            except MetadataUnavailableError as exc:
                if not failing:
                    log.warning(
                        "metadata poll failed, image kept at %d: %s", self.image.offset, exc
                    )
                failing = True
            except Exception:
                if not failing:
                    log.exception("metadata poll failed, image kept at %d", self.image.offset)
                failing = True
            await asyncio.sleep(self.poll_ms / 1000)
