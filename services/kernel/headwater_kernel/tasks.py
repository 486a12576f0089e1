"""Background tasks: ``cancel_and_wait`` stops them for certain, ``BackgroundTasks`` keeps a set.

``cancel_and_wait`` stops asyncio tasks even where a cancellation is swallowed.

On Python 3.11, ``asyncio.wait_for`` loses a cancellation that arrives as the awaitable it
wraps finishes: it returns that result, and the task goes on as if never cancelled (CPython
gh-86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``). Libraries call it too
(redis-py, around every command it sends). A service loop that was inside one when it was
cancelled then runs its next round, so ``task.cancel(); await task`` can wait forever, and a
loop meant to stop (an expiry sweep at shutdown, a heartbeat after a disk failure) keeps acting.
Cancelling again until the task is done ends it: a round of a loop is not always inside such a
call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any

RECANCEL_S = 0.05  # how long a cancelled task gets before it is cancelled again


async def cancel_and_wait(
    tasks: Iterable[asyncio.Future[Any]], *, timeout_s: float | None = None
) -> bool:
    """Cancel ``tasks`` and wait until each is done, cancelling again any that is still running
    after :data:`RECANCEL_S`. True when all are done; False if ``timeout_s`` passed first.

    What the tasks raised is left on them (await a done task to read it)."""
    pending = {task for task in tasks if not task.done()}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while pending:
        for task in pending:
            task.cancel()
        wait = RECANCEL_S
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            wait = min(wait, left)
        _done, pending = await asyncio.wait(pending, timeout=wait)
    return True


class BackgroundTasks:
    """The background tasks of one component, started and stopped together, none lost unseen.

    The one lifecycle for background work (start: :meth:`spawn`; stop: :meth:`stop`, which
    cancels and waits for certain); long loops and short-lived helpers alike (a finished task
    leaves the set).

    A task that ends with an exception while the set is running is logged at error level with
    its traceback and recorded in :attr:`failed`, which the component's readiness reports: a
    loop that dies is a broker that is not ready, never a silent gap. Loops are still written to
    survive their own errors (log, back off, retry); this is the net under them.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._tasks: list[asyncio.Task[None]] = []
        self.failed: dict[str, str] = {}
        """Task name -> the exception that ended it."""

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._ended)
        return task

    def __iter__(self) -> Iterator[asyncio.Task[None]]:
        return iter(list(self._tasks))

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task not in self._tasks:
            return  # stopped with the set
        self._tasks.remove(task)  # short-lived tasks come and go; the set keeps the running ones
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        name = task.get_name()
        self.failed[name] = f"{type(error).__name__}: {error}"
        self._log.error("background task %s died", name, exc_info=error)

    async def stop(self, *, timeout_s: float | None = None) -> bool:
        """Cancel every task and wait for each (see :func:`cancel_and_wait`), at most
        ``timeout_s`` (False if one was still running then); what they raised while stopping
        is dropped."""
        tasks, self._tasks = self._tasks, []
        if not await cancel_and_wait(tasks, timeout_s=timeout_s):
            return False
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return True
