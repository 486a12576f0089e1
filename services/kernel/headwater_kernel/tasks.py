"""``cancel_and_wait``: stop asyncio tasks for certain, even where a cancellation is swallowed.

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
import time
from collections.abc import Iterable
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
