"""Request batching: a group's requests that queue behind its lock run together as one batch.

The seam: *when* a group's requests run is decided here -- one batch per group at a time in
this process, made of every request that arrived while the previous batch ran; *how* a batch is
stored is ``store.groups``'s (one WATCH/MULTI transaction). A burst of joins then loads the
group once, bumps the epoch once and runs the assignor once, instead of once per request.

A request is an operation in two phases: the first records it in the state (join, leave,
heartbeat) and returns the second, which runs after every request of the batch was recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from headwater_coordinator.group import GroupState

T = TypeVar("T")

Finish = Callable[[], Awaitable[Any]]
PhasedOperation = Callable[[GroupState], Awaitable[Finish]]


@dataclass(frozen=True)
class Applied(Generic[T]):
    """An operation applied to a group and stored: what it returned, and the state it left."""

    result: T
    state: GroupState


class Pending(NamedTuple):
    """A queued request: its operation, and the future its caller awaits."""

    operation: PhasedOperation
    future: asyncio.Future[Applied[Any]]


@dataclass(frozen=True)
class Outcome:
    """One request's answer within a batch: its result, or its own error."""

    result: Any = None
    error: Exception | None = None


RunBatch = Callable[[str, list[Pending]], Awaitable[None]]


class BatchQueue:
    """Per group: one lock, and the requests waiting for it; ``run`` stores a whole batch."""

    def __init__(self, run: RunBatch) -> None:
        self._run = run
        self._locks: dict[str, asyncio.Lock] = {}
        self._pending: dict[str, list[Pending]] = {}

    def lock(self, group_id: str) -> asyncio.Lock:
        """The group's lock; requests that arrive while it is held form the next batch."""
        return self._locks.setdefault(group_id, asyncio.Lock())

    async def submit(self, group_id: str, operation: PhasedOperation) -> Applied[Any]:
        """Queue ``operation``; the first waiter to get the lock runs everything queued."""
        future: asyncio.Future[Applied[Any]] = asyncio.get_running_loop().create_future()
        pending = self._pending.setdefault(group_id, [])
        pending.append(Pending(operation, future))
        async with self.lock(group_id):
            if not future.done():
                batch = list(pending)
                pending.clear()
                try:
                    await self._run(group_id, batch)
                except Exception as exc:
                    # The batch could not be stored (Redis does not answer): every request
                    # in it gets that error now, rather than each retrying it in turn.
                    for item in batch:
                        if not item.future.done():
                            item.future.set_exception(exc)
                except BaseException:
                    # Cancelled before answering: whoever holds the lock next runs the
                    # unanswered requests.
                    pending[:0] = [item for item in batch if not item.future.done()]
                    raise
        return future.result()


async def apply(state: GroupState, batch: Sequence[Pending]) -> list[Outcome]:
    """Both phases of every request of ``batch`` on one loaded state, in arrival order.

    A request that fails in its first phase leaves the group's identity as it found it (a
    rejected first request must not create the group); its error is its own answer only.
    """
    outcomes: list[Outcome] = []
    finishes: list[tuple[int, Finish]] = []
    for i, (operation, _) in enumerate(batch):
        created = (state.exists, state.created_ms, state.assignor)
        try:
            finishes.append((i, await operation(state)))
            outcomes.append(Outcome())
        except Exception as exc:  # that request's own error, e.g. fenced
            state.exists, state.created_ms, state.assignor = created
            outcomes.append(Outcome(error=exc))
    for i, finish in finishes:
        try:
            outcomes[i] = Outcome(result=await finish())
        except Exception as exc:
            outcomes[i] = Outcome(error=exc)
    return outcomes


def answer(batch: Sequence[Pending], outcomes: Sequence[Outcome], state: GroupState) -> None:
    """Resolve each request's future with its outcome, once the batch is stored."""
    for (_, future), outcome in zip(batch, outcomes, strict=True):
        if future.done():
            continue
        if outcome.error is None:
            future.set_result(Applied(outcome.result, state))
        else:
            future.set_exception(outcome.error)
