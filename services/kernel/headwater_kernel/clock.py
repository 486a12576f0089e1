"""Time as a parameter: the wall clock, the monotonic clock and sleeping, behind one object.

Services take a :class:`Clock` (``SYSTEM_CLOCK`` unless told otherwise) wherever a rule is about
time -- a cache's time to live, a session's deadline, a segment's age -- so a test of that rule
moves a :class:`ManualClock` forward instead of sleeping it out (Kafka's ``MockTime``). Real
processes in fault tests keep real time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (record timestamps, stored deadlines)."""
        ...

    def now_ms(self) -> int:
        """:meth:`time` in whole milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (local timeouts and ages)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's clocks and asyncio's sleep."""

    def time(self) -> float:
        return time.time()

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that stands still until :meth:`advance` moves it; sleepers wake when it passes
    their time. Both clocks move together (the monotonic one starts at 0)."""

    def __init__(self, start_s: float = 1_700_000_000.0) -> None:
        self._start = start_s
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()  # sleepers are added in a loop, woken from any thread

    def time(self) -> float:
        return self._start + self._elapsed

    def now_ms(self) -> int:
        return int(self.time() * 1000)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wake = asyncio.get_running_loop().create_future()
        with self._lock:
            heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._order), wake))
        await wake

    def advance(self, seconds: float) -> None:
        """Move both clocks forward; wake every sleeper whose time has come, in order.

        Safe from any thread: a test may move the clock of an app that a ``TestClient`` runs
        in its own thread's loop."""
        with self._lock:
            self._elapsed += seconds
            due = []
            while self._sleepers and self._sleepers[0][0] <= self._elapsed:
                due.append(heapq.heappop(self._sleepers)[2])
        for wake in due:
            loop = wake.get_loop()
            try:
                here = asyncio.get_running_loop() is loop
            except RuntimeError:  # no loop runs in this thread
                here = False
            if here:
                _wake(wake)
            elif not loop.is_closed():  # a closed loop's sleepers are gone with it
                loop.call_soon_threadsafe(_wake, wake)


def _wake(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():  # a cancelled sleep stays cancelled
        sleeper.set_result(None)
