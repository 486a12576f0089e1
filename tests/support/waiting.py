"""Waiting for a condition, bounded: the one ``wait_until`` of the suite (Kafka's
``TestUtils.waitUntilTrue``). Tests wait for what they need, never a fixed sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None],
    timeout_s: float = 30.0,
    what: str = "",
    *,
    interval_s: float = 0.05,
    errors: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``check`` until it returns something truthy, and return that; AssertionError after
    ``timeout_s``. Exceptions of the ``errors`` types count as "not yet" (the last is named)."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while True:
        try:
            found = check()
            if found:
                return found
        except errors as exc:
            last = exc
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    detail = "" if last is None else f" (last error: {last!r})"
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what or check}{detail}")


async def wait_until_async(
    check: Callable[[], T | None],
    timeout_s: float = 10.0,
    what: str = "",
    *,
    interval_s: float = 0.01,
) -> T:
    """:func:`wait_until` for a test on an event loop: sleeps let the loop run meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or check}")
        await asyncio.sleep(interval_s)
