"""``acks=all`` waits of one partition's leader (docs/cluster.md, "acks").

A produce request with ``acks=all`` is appended, then waits here until the high watermark passes
the last offset of its batches. What then decides the answer is Kafka's rule
(``Partition.checkEnoughReplicasReachOffset``): the in-sync set at that moment must still have at
least ``min.insync.replicas`` members, else the records are in the log but the answer is
``503 50304`` NOT_ENOUGH_REPLICAS_AFTER_APPEND. A wait fails with ``421 42101`` when the broker
stops leading the partition and with ``504 50401`` after the request timeout.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from headwater.errors import (
    HeadwaterError,
    NotEnoughReplicasAfterAppendError,
    RequestTimedOutError,
)


class AckWaiters:
    """Futures waiting for the high watermark to pass an offset, lowest offset first."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()
        self._failed: HeadwaterError | None = None

    def __len__(self) -> int:
        return sum(1 for _o, _n, f in self._heap if not f.done())

    async def wait(self, last_offset: int, timeout_s: float) -> None:
        """Return once :meth:`on_high_watermark` passes ``last_offset`` (or raise as it says)."""
        if self._failed is not None:
            raise self._failed
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (last_offset, next(self._counter), future))
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            if future.done() and not future.cancelled():
                future.result()  # answered at the last moment: its answer stands
                return
            future.cancel()
            raise RequestTimedOutError(
                f"{self.name}: acks=all not satisfied within {timeout_s * 1000:.0f} ms: the "
                f"in-sync replicas have not all copied offset {last_offset}"
            ) from None
        finally:
            if not future.done():
                future.cancel()

    def on_high_watermark(self, high_watermark: int, isr_size: int, min_isr: int) -> int:
        """Answer the waits below ``high_watermark``; return how many were answered."""
        answered = 0
        while self._heap and self._heap[0][0] < high_watermark:
            last_offset, _n, future = heapq.heappop(self._heap)
            if future.done():
                continue
            answered += 1
            if isr_size >= min_isr:
                future.set_result(None)
            else:
                future.set_exception(
                    NotEnoughReplicasAfterAppendError(
                        f"{self.name}: offset {last_offset} was appended, but only {isr_size} "
                        f"replica(s) are in sync, fewer than min.insync.replicas={min_isr}"
                    )
                )
        return answered

    def fail_all(self, error: HeadwaterError) -> None:
        """Fail every wait, now and later (leadership lost: the leader object is retired)."""
        self._failed = error
        heap, self._heap = self._heap, []
        for _o, _n, future in heap:
            if not future.done():
                future.set_exception(error)
