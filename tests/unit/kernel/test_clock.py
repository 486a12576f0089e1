"""The manual clock moves only when told, and wakes its sleepers in order when it passes them."""

from __future__ import annotations

import asyncio

from headwater_kernel.clock import SYSTEM_CLOCK, ManualClock


def test_a_manual_clock_stands_still_and_wakes_sleepers_in_order() -> None:
    async def main() -> None:
        clock = ManualClock(start_s=100.0)
        woke: list[str] = []

        async def sleeper(name: str, seconds: float) -> None:
            await clock.sleep(seconds)
            woke.append(name)

        tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("late", 2.0), ("soon", 1.0))]
        await asyncio.sleep(0)
        assert (clock.time(), clock.monotonic(), clock.now_ms()) == (100.0, 0.0, 100_000)
        clock.advance(0.5)
        await asyncio.sleep(0)
        assert woke == []
        clock.advance(0.5)
        await asyncio.sleep(0)
        assert woke == ["soon"]
        clock.advance(5)
        await asyncio.gather(*tasks)
        assert woke == ["soon", "late"]
        assert (clock.time(), clock.monotonic()) == (106.0, 6.0)

    asyncio.run(main())


def test_the_system_clock_reads_the_machine() -> None:
    before = SYSTEM_CLOCK.monotonic()
    assert abs(SYSTEM_CLOCK.now_ms() / 1000 - SYSTEM_CLOCK.time()) < 1
    assert SYSTEM_CLOCK.monotonic() >= before
