"""Group state in Redis: load a group, apply a batch of operations, store it in one transaction.

The seam: this module owns the group hash and the optimistic transaction around it. Each batch
of requests (``store.batch``) is one transaction: read ``group:{g}`` under WATCH, apply the
state machine in Python, write back in MULTI/EXEC with the change notice (``store.changes``);
a concurrent change by any coordinator process aborts the EXEC and the batch reruns on fresh
state. If an operation raises, nothing it changed is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError
from redis.typing import EncodableT

from headwater.groups.errors import GroupNotEmptyError, GroupNotFoundError
from headwater_coordinator.group import GroupState
from headwater_coordinator.member import Member
from headwater_coordinator.store.batch import (
    Applied,
    BatchQueue,
    Finish,
    Pending,
    PhasedOperation,
    answer,
    apply,
)
from headwater_coordinator.store.changes import notice
from headwater_coordinator.store.connection import reaching_redis
from headwater_coordinator.store.keyspace import Keyspace
from headwater_coordinator.store.liveness import fast_record

T = TypeVar("T")


class GroupStore:
    """Every group's state in one Redis, under one keyspace."""

    def __init__(self, redis: Redis, keys: Keyspace, offsets_retention_ms: int) -> None:
        self.redis = redis
        self.keys = keys
        self.retention_ms = offsets_retention_ms
        self.batches = BatchQueue(self._run_batch)

    @reaching_redis
    async def load(self, group_id: str) -> GroupState:
        raw = await self.redis.hgetall(self.keys.group(group_id))
        beats = await self.redis.hgetall(self.keys.beats(group_id))
        return self._decode(
            group_id, cast(dict[bytes, bytes], raw), cast(dict[bytes, bytes], beats)
        )

    @staticmethod
    def _decode(group_id: str, raw: dict[bytes, bytes], beats: dict[bytes, bytes]) -> GroupState:
        meta = orjson.loads(raw[b"meta"]) if b"meta" in raw else None
        members = [Member.from_json(orjson.loads(v)) for k, v in raw.items() if k.startswith(b"m:")]
        for member in members:
            # Fast heartbeats record liveness beside the member's JSON (store.liveness).
            beat = beats.get(member.member_id.encode())
            if beat is not None:
                member.last_heartbeat_ms = max(member.last_heartbeat_ms, int(beat))
        return GroupState.from_storage(group_id, meta, members)

    async def transact(
        self, group_id: str, operation: Callable[[GroupState], Awaitable[T]]
    ) -> Applied[T]:
        """Run ``operation`` on the group's current state and store what it changed, atomically.

        If the operation raises, nothing it changed is written. Reruns on a concurrent change.
        """

        async def phased(state: GroupState) -> Finish:
            result = await operation(state)

            async def finish() -> T:
                return result

            return finish

        return cast(Applied[T], await self.transact_phased(group_id, phased))

    async def transact_phased(self, group_id: str, operation: PhasedOperation) -> Applied[Any]:
        """Like :meth:`transact` for a two-phase operation, batched with the group's other
        operations that are waiting for it (``store.batch``)."""
        return await self.batches.submit(group_id, operation)

    @reaching_redis
    async def _run_batch(self, group_id: str, batch: list[Pending]) -> None:
        key = self.keys.group(group_id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    raw = await pipe.hgetall(key)
                    # Read, not watched: a concurrent fast heartbeat only makes a member
                    # more alive, and must not abort this transaction.
                    beats = await self.redis.hgetall(self.keys.beats(group_id))
                    state = self._decode(
                        group_id,
                        cast(dict[bytes, bytes], raw),
                        cast(dict[bytes, bytes], beats),
                    )
                    had_members = bool(state.members)
                    outcomes = await apply(state, batch)
                    if any(outcome.error is None for outcome in outcomes):
                        pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                        self._write(pipe, state, had_members)
                        wake = state.members_to_wake()
                        if wake:
                            pipe.publish(self.keys.changes, notice(group_id, wake))
                        await pipe.execute()
                    else:
                        await pipe.reset()  # type: ignore[no-untyped-call]  # untyped
                except WatchError:
                    continue
            answer(batch, outcomes, state)
            return

    def _write(self, pipe: Pipeline, state: GroupState, had_members: bool) -> None:
        g = state.group_id
        key = self.keys.group(g)
        if not state.exists:
            return
        fields: dict[EncodableT, EncodableT] = {
            "meta": orjson.dumps(state.meta_json()),
            "size": str(len(state.members)).encode(),
        }
        for member_id in state.changed_members:
            member = state.members[member_id]
            data = member.to_json()
            data["fast"] = fast_record(member, state.assignment_epoch)
            fields[f"m:{member_id}"] = orjson.dumps(data)
        pipe.hset(key, mapping=fields)
        if state.removed_members:
            pipe.hdel(key, *(f"m:{mid}" for mid in state.removed_members))
            pipe.hdel(self.keys.beats(g), *state.removed_members)
            pipe.zrem(
                self.keys.deadlines,
                *(self.keys.deadline_entry(g, mid) for mid in state.removed_members),
            )
        for member_id, ttl_ms in state.fenced_members.items():
            pipe.set(self.keys.fenced(g, member_id), b"1", px=max(ttl_ms * 2, 1000))
        deadlines = {
            self.keys.deadline_entry(g, mid): state.members[mid].deadline_ms
            for mid in state.changed_members
        }
        if deadlines:
            pipe.zadd(self.keys.deadlines, deadlines)
        pipe.sadd(self.keys.groups, g)
        if state.members:
            if not had_members:
                pipe.persist(key)
                pipe.persist(self.keys.offsets(g))
        else:
            pipe.pexpire(key, self.retention_ms)
            pipe.pexpire(self.keys.offsets(g), self.retention_ms)
            pipe.delete(self.keys.beats(g))

    @reaching_redis
    async def is_fenced(self, group_id: str, member_id: str | None) -> bool:
        """Whether ``member_id`` was replaced by a static rejoin (recently enough to remember)."""
        if not member_id:
            return False
        return bool(await self.redis.exists(self.keys.fenced(group_id, member_id)))

    @reaching_redis
    async def exists(self, group_id: str) -> bool:
        """A group exists while it has state or committed offsets."""
        n = await self.redis.exists(self.keys.group(group_id), self.keys.offsets(group_id))
        return bool(n)

    @reaching_redis
    async def delete(self, group_id: str) -> None:
        """Delete an empty group and its offsets."""
        key = self.keys.group(group_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    if not await pipe.exists(key, self.keys.offsets(group_id)):
                        raise GroupNotFoundError(f"group {group_id} not found")
                    size = int(await pipe.hget(key, "size") or 0)
                    if size:
                        raise GroupNotEmptyError(f"group {group_id} has {size} members")
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    pipe.delete(key, self.keys.offsets(group_id), self.keys.beats(group_id))
                    pipe.srem(self.keys.groups, group_id)
                    await pipe.execute()
                    return
                except WatchError:
                    continue

    @reaching_redis
    async def group_ids(self) -> list[str]:
        """Ids of the groups that exist, sorted; ids whose keys are gone are forgotten."""
        members = cast(set[bytes], await self.redis.smembers(self.keys.groups))
        names = sorted(m.decode() for m in members)
        alive = []
        for name in names:
            if await self.exists(name):
                alive.append(name)
            else:  # its keys expired (offsets retention) or were deleted
                await self.redis.srem(self.keys.groups, name)
        return alive
