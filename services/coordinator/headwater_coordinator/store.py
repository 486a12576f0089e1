"""Redis storage of groups and committed offsets; every change is one atomic Redis transaction.

Keys (``P`` is COORDINATOR_KEY_PREFIX)::

    P groups                 set    every group id that may exist (pruned lazily when listed)
    P deadlines              zset   "group\\0member" -> epoch ms when the member expires
    P group:{g}              hash   "meta" -> JSON (epochs, assignor, topic sizes, created),
                                    "size" -> member count, "m:{member id}" -> member JSON
    P offsets:{g}            hash   "topic:partition" -> JSON {offset, metadata, commit_timestamp}
    P beats:{g}              hash   member id -> ms of its last fast-path heartbeat (liveness)
    P fenced:{g}:{member}    string a member id replaced by a static rejoin (expires)

A group operation reads ``group:{g}`` under WATCH, applies the state machine in Python and
writes back in MULTI/EXEC; a concurrent change by any coordinator process aborts the EXEC and the
operation reruns on fresh state. Within one process a per-group lock keeps its own requests from
colliding, and the requests that queued behind it run together as one batch in one transaction:
a burst of joins then loads the group once, bumps the epoch once and runs the assignor once,
instead of once per request. Offset commits are one Lua script that checks the member and its
epoch and ownership and writes the offsets in the same step. With no members, ``group:{g}`` and
``offsets:{g}`` carry a TTL of the offsets retention (Kafka's offsets.retention.minutes after the
group empties).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError

from headwater.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupNotEmptyError,
    GroupNotFoundError,
    PartitionNotOwnedError,
    StaleMemberEpochError,
    UnknownMemberError,
)
from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator.group import GroupState, Member

T = TypeVar("T")

# An operation in two phases: the first records its request in the state (join, leave,
# heartbeat) and returns the second, which runs after every request of the batch was recorded.
Finish = Callable[[], Awaitable[Any]]
PhasedOperation = Callable[[GroupState], Awaitable[Finish]]

# KEYS: group hash, offsets hash, fenced marker, groups set.
# ARGV: group id, member id ("" = simple commit), member epoch, retention ms, then per offset:
# topic, partition, stored JSON value. Returns {"OK"} or {error name, detail}.
COMMIT_SCRIPT = """
local mid = ARGV[2]
local epoch = tonumber(ARGV[3])
local n = (#ARGV - 4) / 3
if mid == '' then
  local size = tonumber(redis.call('HGET', KEYS[1], 'size') or '0')
  if size > 0 then return {'NOT_EMPTY', tostring(size)} end
else
  local raw = redis.call('HGET', KEYS[1], 'm:' .. mid)
  if not raw then
    if redis.call('EXISTS', KEYS[3]) == 1 then return {'FENCED_INSTANCE', ''} end
    return {'UNKNOWN_MEMBER', ''}
  end
  local m = cjson.decode(raw)
  -- Any epoch the member may still hold is fine: ownership is checked below, and a rebalance
  -- that left its partitions alone moves it to a new epoch it has not heard of yet.
  if epoch < m.previous_epoch then return {'STALE', tostring(m.epoch)} end
  if epoch > m.epoch then return {'FENCED', tostring(m.epoch)} end
  local owned = {}
  for t, ps in pairs(m.assigned) do
    for _, p in ipairs(ps) do owned[t .. ':' .. p] = true end
  end
  for t, ps in pairs(m.revoking) do
    for _, p in ipairs(ps) do owned[t .. ':' .. p] = true end
  end
  for i = 0, n - 1 do
    local f = ARGV[5 + 3 * i] .. ':' .. ARGV[6 + 3 * i]
    if not owned[f] then return {'NOT_OWNED', f} end
  end
end
for i = 0, n - 1 do
  redis.call('HSET', KEYS[2], ARGV[5 + 3 * i] .. ':' .. ARGV[6 + 3 * i], ARGV[7 + 3 * i])
end
if mid == '' then
  redis.call('SADD', KEYS[4], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return {'OK', ''}
"""


# The steady-state heartbeat, in one step: a member that is stable (owns exactly its target at
# the group's assignment epoch) and reports nothing new only needs its liveness recorded (and,
# if a rebalance moved it to a new epoch without touching its partitions, to hear that epoch).
# Anything else -- an unknown epoch, owned set, subscription, timeouts, instance id, or topic
# sizes that differ from the group's -- returns nil and the heartbeat takes the full path.
# Liveness goes to its own hash (``beats:{g}``), which group transactions read but do not WATCH:
# a fast heartbeat never aborts a transaction, and needs no lock.
# KEYS: group hash, deadlines zset, beats hash. ARGV: group id, member id, epoch, now, owned
# key ("*" = not reported), topics key ("*" = not sent), session ms, rebalance ms, instance id
# ("" = none), JSON {topic: partitions} of the group's subscribed topics. Returns member JSON.
FAST_HEARTBEAT_SCRIPT = """
local raw = redis.call('HGET', KEYS[1], 'm:' .. ARGV[2])
local metaraw = redis.call('HGET', KEYS[1], 'meta')
if not raw or not metaraw then return false end
local m = cjson.decode(raw)
local meta = cjson.decode(metaraw)
local fast = m.fast
if type(fast) ~= 'table' or not fast.stable or m.left_static then return false end
local sent = tonumber(ARGV[3])
if sent < m.previous_epoch or sent > m.epoch or m.epoch ~= meta.assignment_epoch then
  return false
end
if meta.epoch ~= meta.assignment_epoch then return false end
if ARGV[5] ~= '*' and ARGV[5] ~= fast.assigned_key then return false end
if ARGV[6] ~= '*' and ARGV[6] ~= fast.topics_key then return false end
if m.session_timeout_ms ~= tonumber(ARGV[7]) then return false end
if m.rebalance_timeout_ms ~= tonumber(ARGV[8]) then return false end
local instance = m.instance_id
if instance == cjson.null then instance = '' end
if instance ~= ARGV[9] then return false end
local sizes = cjson.decode(ARGV[10])
for t, n in pairs(sizes) do if meta.topics[t] ~= n then return false end end
for t, n in pairs(meta.topics) do if sizes[t] ~= n then return false end end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + m.session_timeout_ms, ARGV[1] .. '\\0' .. ARGV[2])
return raw
"""


def partitions_key(tps: Iterable[tuple[str, int]]) -> str:
    """A canonical string of a partition set, compared by the fast heartbeat script."""
    return ",".join(f"{t}:{int(p)}" for t, p in sorted(tps))


def topics_key(topics: Iterable[str]) -> str:
    return ",".join(sorted(topics))


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: PartitionId
    offset: Offset
    metadata: str
    commit_timestamp: int


class GroupStore:
    """Groups and offsets in one Redis, under one key prefix."""

    def __init__(self, redis: Redis, prefix: str, offsets_retention_ms: int) -> None:
        self.redis = redis
        self.prefix = prefix
        self.retention_ms = offsets_retention_ms
        self._locks: dict[str, asyncio.Lock] = {}
        self._pending: dict[str, list[tuple[PhasedOperation, asyncio.Future[Any]]]] = {}
        self._commit = redis.register_script(COMMIT_SCRIPT)
        self._fast_heartbeat = redis.register_script(FAST_HEARTBEAT_SCRIPT)

    # --- keys ----------------------------------------------------------------------------------

    def group_key(self, group_id: str) -> str:
        return f"{self.prefix}group:{group_id}"

    def offsets_key(self, group_id: str) -> str:
        return f"{self.prefix}offsets:{group_id}"

    def beats_key(self, group_id: str) -> str:
        return f"{self.prefix}beats:{group_id}"

    def fenced_key(self, group_id: str, member_id: str) -> str:
        return f"{self.prefix}fenced:{group_id}:{member_id}"

    @property
    def groups_key(self) -> str:
        return f"{self.prefix}groups"

    @property
    def changes_channel(self) -> str:
        """Pub/sub channel: ``group id \\n member id,...`` when those members may have news."""
        return f"{self.prefix}changes"

    @property
    def deadlines_key(self) -> str:
        return f"{self.prefix}deadlines"

    # --- group transactions --------------------------------------------------------------------

    async def load(self, group_id: str) -> GroupState:
        raw = await self.redis.hgetall(self.group_key(group_id))
        beats = await self.redis.hgetall(self.beats_key(group_id))
        return self._decode(
            group_id, cast(dict[bytes, bytes], raw), cast(dict[bytes, bytes], beats)
        )

    @staticmethod
    def _decode(group_id: str, raw: dict[bytes, bytes], beats: dict[bytes, bytes]) -> GroupState:
        meta = orjson.loads(raw[b"meta"]) if b"meta" in raw else None
        members = [Member.from_json(orjson.loads(v)) for k, v in raw.items() if k.startswith(b"m:")]
        for member in members:
            # Fast heartbeats record liveness beside the member's JSON (see the script).
            beat = beats.get(member.member_id.encode())
            if beat is not None:
                member.last_heartbeat_ms = max(member.last_heartbeat_ms, int(beat))
        return GroupState.from_storage(group_id, meta, members)

    async def transact(
        self, group_id: str, operation: Callable[[GroupState], Awaitable[T]]
    ) -> tuple[T, GroupState]:
        """Run ``operation`` on the group's current state and store what it changed, atomically.

        If the operation raises, nothing it changed is written. Reruns on a concurrent change.
        """

        async def phased(state: GroupState) -> Finish:
            result = await operation(state)

            async def finish() -> T:
                return result

            return finish

        return await self.transact_phased(group_id, phased)

    async def transact_phased(
        self, group_id: str, operation: PhasedOperation
    ) -> tuple[Any, GroupState]:
        """Like :meth:`transact` for a two-phase operation, batched with the group's other
        operations that are waiting for it (see the module docstring)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending = self._pending.setdefault(group_id, [])
        pending.append((operation, future))
        lock = self._locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            if not future.done():
                batch = list(pending)
                pending.clear()
                try:
                    await self._run_batch(group_id, batch)
                except BaseException:
                    # Cancelled or failed before answering: whoever holds the lock next runs
                    # the unanswered requests.
                    pending[:0] = [item for item in batch if not item[1].done()]
                    raise
        return cast(tuple[Any, GroupState], future.result())

    async def _run_batch(
        self, group_id: str, batch: list[tuple[PhasedOperation, asyncio.Future[Any]]]
    ) -> None:
        key = self.group_key(group_id)
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    raw = await pipe.hgetall(key)
                    # Read, not watched: a concurrent fast heartbeat only makes a member
                    # more alive, and must not abort this transaction.
                    beats = await self.redis.hgetall(self.beats_key(group_id))
                    state = self._decode(
                        group_id,
                        cast(dict[bytes, bytes], raw),
                        cast(dict[bytes, bytes], beats),
                    )
                    had_members = bool(state.members)
                    outcomes: list[tuple[bool, Any]] = []
                    finishes: list[tuple[int, Finish]] = []
                    for i, (operation, _) in enumerate(batch):
                        created = (state.exists, state.created_ms, state.assignor)
                        try:
                            finishes.append((i, await operation(state)))
                            outcomes.append((True, None))
                        except Exception as exc:  # that request's own error, e.g. fenced
                            state.exists, state.created_ms, state.assignor = created
                            outcomes.append((False, exc))
                    for i, finish in finishes:
                        try:
                            outcomes[i] = (True, await finish())
                        except Exception as exc:
                            outcomes[i] = (False, exc)
                    if any(ok for ok, _ in outcomes):
                        pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                        self._write(pipe, state, had_members)
                        wake = state.members_to_wake()
                        if wake:
                            pipe.publish(self.changes_channel, f"{group_id}\n{','.join(wake)}")
                        await pipe.execute()
                    else:
                        await pipe.reset()  # type: ignore[no-untyped-call]  # untyped
                except WatchError:
                    continue
            for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result((value, state))
                else:
                    future.set_exception(value)
            return

    def _write(self, pipe: Any, state: GroupState, had_members: bool) -> None:
        g = state.group_id
        key = self.group_key(g)
        if not state.exists:
            return
        fields: dict[str | bytes, bytes] = {
            "meta": orjson.dumps(state.meta_json()),
            "size": str(len(state.members)).encode(),
        }
        for member_id in state.changed_members:
            member = state.members[member_id]
            data = member.to_json()
            data["fast"] = {
                "stable": not member.revoking
                and member.assigned == member.target
                and int(member.epoch) == int(state.assignment_epoch),
                "assigned_key": partitions_key(member.assigned),
                "topics_key": topics_key(member.topics),
            }
            fields[f"m:{member_id}"] = orjson.dumps(data)
        pipe.hset(key, mapping=fields)
        if state.removed_members:
            pipe.hdel(key, *(f"m:{mid}" for mid in state.removed_members))
            pipe.hdel(self.beats_key(g), *state.removed_members)
            pipe.zrem(self.deadlines_key, *(f"{g}\0{mid}" for mid in state.removed_members))
        for member_id, ttl_ms in state.fenced_members.items():
            pipe.set(self.fenced_key(g, member_id), b"1", px=max(ttl_ms * 2, 1000))
        deadlines = {f"{g}\0{mid}": state.members[mid].deadline_ms for mid in state.changed_members}
        if deadlines:
            pipe.zadd(self.deadlines_key, deadlines)
        pipe.sadd(self.groups_key, g)
        if state.members:
            if not had_members:
                pipe.persist(key)
                pipe.persist(self.offsets_key(g))
        else:
            pipe.pexpire(key, self.retention_ms)
            pipe.pexpire(self.offsets_key(g), self.retention_ms)
            pipe.delete(self.beats_key(g))

    async def fast_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        now_ms: int,
        owned: Iterable[tuple[str, int]] | None,
        topics: Iterable[str] | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        instance_id: str | None,
        sizes: dict[str, int],
    ) -> Member | None:
        """Record a stable member's heartbeat in one script; None if it needs the full path.

        No lock: the script is atomic and writes nothing a group transaction watches.
        """
        raw = await self._fast_heartbeat(
            keys=[self.group_key(group_id), self.deadlines_key, self.beats_key(group_id)],
            args=[
                group_id,
                member_id,
                member_epoch,
                now_ms,
                "*" if owned is None else partitions_key(owned),
                "*" if topics is None else topics_key(topics),
                session_timeout_ms,
                rebalance_timeout_ms,
                instance_id or "",
                orjson.dumps(sizes),
            ],
        )
        return None if raw is None else Member.from_json(orjson.loads(raw))

    async def due_groups(self, now_ms: int, limit: int = 500) -> set[str]:
        """Groups that have a member past its deadline (for the expiry sweep)."""
        due = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.deadlines_key, "-inf", now_ms, 0, limit),
        )
        return {entry.split(b"\0", 1)[0].decode() for entry in due}

    async def prune_deadlines(self, group_id: str, now_ms: int, alive: Iterable[str]) -> None:
        """Drop due deadline entries of the group's members that no longer exist."""
        due = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.deadlines_key, "-inf", now_ms, 0, 10_000),
        )
        keep = set(alive)
        stale = []
        for entry in due:
            group, _, member = entry.decode().partition("\0")
            if group == group_id and member not in keep:
                stale.append(entry)
        if stale:
            await self.redis.zrem(self.deadlines_key, *stale)

    async def forget_deadlines(self, group_id: str, member_ids: Iterable[str]) -> None:
        entries = [f"{group_id}\0{mid}" for mid in member_ids]
        if entries:
            await self.redis.zrem(self.deadlines_key, *entries)

    async def is_fenced(self, group_id: str, member_id: str | None) -> bool:
        if not member_id:
            return False
        return bool(await self.redis.exists(self.fenced_key(group_id, member_id)))

    # --- offsets -------------------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        member_id: str | None,
        member_epoch: MemberEpoch,
        offsets: Iterable[tuple[str, PartitionId, Offset, str]],
        now_ms: int,
    ) -> None:
        """Store offsets if the member owns every partition at its current epoch (one script)."""
        argv: list[Any] = [group_id, member_id or "", int(member_epoch), self.retention_ms]
        for topic, partition, offset, metadata in offsets:
            value = orjson.dumps(
                {"offset": offset, "metadata": metadata, "commit_timestamp": now_ms}
            )
            argv += [topic, int(partition), value]
        keys = [
            self.group_key(group_id),
            self.offsets_key(group_id),
            self.fenced_key(group_id, member_id or ""),
            self.groups_key,
        ]
        outcome, detail = (x.decode() for x in await self._commit(keys=keys, args=argv))
        if outcome == "OK":
            return
        if outcome == "NOT_EMPTY":
            raise GroupNotEmptyError(
                f"group {group_id} has {detail} members; commit with a member id and epoch"
            )
        if outcome == "UNKNOWN_MEMBER":
            raise UnknownMemberError(f"member {member_id} is not in group {group_id}")
        if outcome == "FENCED_INSTANCE":
            raise FencedInstanceIdError(
                f"member {member_id} was replaced by a newer member with its instance id"
            )
        if outcome == "STALE":
            raise StaleMemberEpochError(
                f"member {member_id} committed at epoch {member_epoch}; its epoch is {detail}"
            )
        if outcome == "FENCED":
            raise FencedMemberEpochError(
                f"member {member_id} committed at epoch {member_epoch}; its epoch is {detail}"
            )
        raise PartitionNotOwnedError(f"member {member_id} does not own partition {detail}")

    async def committed(self, group_id: str) -> list[CommittedOffset]:
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.offsets_key(group_id)))
        out = []
        for field_, value in raw.items():
            topic, _, partition = field_.decode().rpartition(":")
            v = orjson.loads(value)
            out.append(
                CommittedOffset(
                    topic,
                    PartitionId(int(partition)),
                    Offset(v["offset"]),
                    v["metadata"],
                    v["commit_timestamp"],
                )
            )
        return sorted(out, key=lambda c: (c.topic, c.partition))

    async def exists(self, group_id: str) -> bool:
        n = await self.redis.exists(self.group_key(group_id), self.offsets_key(group_id))
        return bool(n)

    async def replace_offsets(
        self, group_id: str, offsets: Iterable[tuple[str, PartitionId, Offset]], now_ms: int
    ) -> None:
        """Overwrite committed offsets of a group that has no members (an offsets reset)."""
        key = self.group_key(group_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    size = int(await pipe.hget(key, "size") or 0)
                    if size:
                        raise GroupNotEmptyError(
                            f"group {group_id} has {size} members; stop them before a reset"
                        )
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    values: dict[Any, bytes] = {
                        f"{t}:{int(p)}": orjson.dumps(
                            {"offset": o, "metadata": "", "commit_timestamp": now_ms}
                        )
                        for t, p, o in offsets
                    }
                    if values:
                        pipe.hset(self.offsets_key(group_id), mapping=values)
                    pipe.pexpire(self.offsets_key(group_id), self.retention_ms)
                    pipe.sadd(self.groups_key, group_id)
                    await pipe.execute()
                    return
                except WatchError:
                    continue

    async def delete(self, group_id: str) -> None:
        """Delete an empty group and its offsets."""
        key = self.group_key(group_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    if not await pipe.exists(key, self.offsets_key(group_id)):
                        raise GroupNotFoundError(f"group {group_id} not found")
                    size = int(await pipe.hget(key, "size") or 0)
                    if size:
                        raise GroupNotEmptyError(f"group {group_id} has {size} members")
                    pipe.multi()  # type: ignore[no-untyped-call]  # untyped in redis-py
                    pipe.delete(key, self.offsets_key(group_id), self.beats_key(group_id))
                    pipe.srem(self.groups_key, group_id)
                    await pipe.execute()
                    return
                except WatchError:
                    continue

    async def list_groups(self) -> list[str]:
        members = cast(set[bytes], await self.redis.smembers(self.groups_key))
        names = sorted(m.decode() for m in members)
        alive = []
        for name in names:
            if await self.exists(name):
                alive.append(name)
            else:  # its keys expired (offsets retention) or were deleted
                await self.redis.srem(self.groups_key, name)
        return alive


class GroupChanges:
    """Wakes parked heartbeats in this process when any process publishes a group change."""

    def __init__(self, redis: Redis, channel: str) -> None:
        self.redis = redis
        self.channel = channel
        self._events: dict[str, asyncio.Event] = {}  # "group\nmember" -> its parked waiters

    def watch(self, group_id: str, member_id: str) -> asyncio.Event:
        """The event set at the member's next news: take it *before* reading the group's
        state, so a change between that read and the wait is not missed."""
        return self._events.setdefault(f"{group_id}\n{member_id}", asyncio.Event())

    @staticmethod
    async def wait(event: asyncio.Event, timeout_s: float) -> bool:
        """True if the watched change happened within ``timeout_s``."""
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def wake(self, message: str) -> None:
        group_id, _, members = message.partition("\n")
        for member_id in members.split(","):
            event = self._events.pop(f"{group_id}\n{member_id}", None)
            if event is not None:
                event.set()

    async def listen(self) -> None:
        """Forward published changes to waiters, forever (reconnecting after errors)."""
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self.wake(message["data"].decode())
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), 1)  # type: ignore[no-untyped-call]
