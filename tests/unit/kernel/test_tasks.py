"""cancel_and_wait ends loops whose cancellation a ``wait_for`` swallowed (Python 3.11);
BackgroundTasks keeps the running tasks of a component and records the ones that died."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from headwater_kernel import tasks
from headwater_kernel.tasks import BackgroundTasks, cancel_and_wait


async def _loop_in_wait_for() -> None:
    """A loop that lives in ``asyncio.wait_for`` around awaitables that finish at once: on
    Python 3.11 most cancels land as one finishes and are lost."""
    while True:
        await asyncio.wait_for(asyncio.sleep(0), 1)


def test_loops_that_swallow_a_cancel_are_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.002)  # many cancels are lost: re-cancel quickly

    async def main() -> list[bool]:
        ended = []
        for _ in range(100):
            task = asyncio.create_task(_loop_in_wait_for())
            await asyncio.sleep(random.uniform(0, 0.002))
            ended.append(await cancel_and_wait([task], timeout_s=5))
            assert task.cancelled()
        return ended

    assert all(asyncio.run(main()))


def test_a_task_that_refuses_to_end_is_given_up_on_after_the_timeout() -> None:
    async def stubborn(stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                continue  # a bug: it never ends while cancelled

    async def main() -> tuple[bool, bool]:
        stop = asyncio.Event()
        task = asyncio.create_task(stubborn(stop))
        await asyncio.sleep(0)
        given_up = await cancel_and_wait([task], timeout_s=0.3)
        stop.set()
        ended = await cancel_and_wait([task], timeout_s=5)
        return given_up, ended

    assert asyncio.run(main()) == (False, True)


def test_done_tasks_keep_what_they_raised() -> None:
    async def fails() -> None:
        raise ValueError("kept")

    async def main() -> BaseException | None:
        task = asyncio.create_task(fails())
        await asyncio.sleep(0)
        assert await cancel_and_wait([task])
        return task.exception()

    assert isinstance(asyncio.run(main()), ValueError)


def test_background_tasks_record_deaths_and_forget_finished_tasks() -> None:
    async def main() -> None:
        tasks = BackgroundTasks(logging.getLogger("tests.tasks"))

        async def done() -> None:
            return

        async def dies() -> None:
            raise RuntimeError("disk on fire")

        async def forever() -> None:
            await asyncio.Event().wait()

        tasks.spawn(done(), "short")
        tasks.spawn(dies(), "loop")
        tasks.spawn(forever(), "forever")
        await asyncio.sleep(0.05)
        assert [t.get_name() for t in tasks] == ["forever"]  # finished ones leave the set
        assert tasks.failed == {"loop": "RuntimeError: disk on fire"}
        assert await tasks.stop(timeout_s=1)
        assert list(tasks) == []

    asyncio.run(main())
