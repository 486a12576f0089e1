"""An edge-triggered signal: every waiter shares one future, completed by the next ``fire``.

What long-polling fetches wait on (the high watermark or the log end moving). Waiters never
cancel the shared future (they wait on it through ``asyncio.shield``); ``fire`` completes it and
the next waiter makes a new one.
"""

from __future__ import annotations

import asyncio
import contextlib


class Signal:
    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None

    def future(self) -> asyncio.Future[None]:
        """The future the next :meth:`fire` completes."""
        if self._future is None or self._future.done():
            self._future = asyncio.get_running_loop().create_future()
        return self._future

    def fire(self) -> None:
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        """Return at the next :meth:`fire`, or after ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.future()), timeout_s)
