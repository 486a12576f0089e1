"""Change notifications: telling parked heartbeats, in any coordinator process, of their news.

The seam: a group transaction publishes a :func:`notice` on the ``changes`` channel in the same
MULTI/EXEC that writes the change (``store.groups``); every process's :class:`GroupChanges`
listens and wakes the heartbeats parked on those members. The message format is made and read
only here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from redis.asyncio import Redis


def notice(group_id: str, member_ids: Iterable[str]) -> str:
    """The message that wakes ``member_ids`` of ``group_id``: ``group\\nmember,member,...``."""
    return f"{group_id}\n{','.join(member_ids)}"


class GroupChanges:
    """Wakes parked heartbeats in this process when any process publishes a group change."""

    def __init__(self, redis: Redis, channel: str) -> None:
        self.redis = redis
        self.channel = channel
        self._events: dict[str, asyncio.Event] = {}  # "group\nmember" -> its parked waiters

    def watch(self, group_id: str, member_id: str) -> asyncio.Event:
        """The event set at the member's next news: take it *before* reading the group's
        state, so a change between that read and the wait is not missed."""
        return self._events.setdefault(f"{group_id}\n{member_id}", asyncio.Event())

    @staticmethod
    async def wait(event: asyncio.Event, timeout_s: float) -> bool:
        """True if the watched change happened within ``timeout_s``."""
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def wake(self, message: str) -> None:
        """Set the events of the members a :func:`notice` names."""
        group_id, _, members = message.partition("\n")
        for member_id in members.split(","):
            event = self._events.pop(f"{group_id}\n{member_id}", None)
            if event is not None:
                event.set()

    async def listen(self) -> None:
        """Forward published changes to waiters, forever (reconnecting after errors)."""
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self.wake(message["data"].decode())
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), 1)  # type: ignore[no-untyped-call]
