"""Member liveness: fast heartbeats, the deadlines the sweep reads, and when a sweep last ran.

The seam: a stable member's heartbeat is one Lua script that records liveness beside the group
-- without the group's lock, without WATCH, never aborting a group transaction -- while every
other change goes through ``store.groups``. The two meet in the member's ``fast`` record
(:func:`fast_record`), which each group write stores and only this script reads.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import orjson
from redis.asyncio import Redis

from headwater.topic_partition import PartitionKey
from headwater.types import GroupEpoch, MemberEpoch
from headwater_coordinator.member import Member
from headwater_coordinator.store.connection import reaching_redis
from headwater_coordinator.store.keyspace import Keyspace

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


def fast_record(member: Member, assignment_epoch: GroupEpoch) -> dict[str, Any]:
    """What the script compares a heartbeat with, stored in the member's JSON as ``fast``."""
    return {
        "stable": not member.revoking
        and member.assigned == member.target
        and int(member.epoch) == int(assignment_epoch),
        "assigned_key": partitions_key(member.assigned),
        "topics_key": topics_key(member.topics),
    }


@dataclass(frozen=True)
class FastHeartbeat:
    """A heartbeat as the script checks it: ``owned`` and ``topics`` None when not sent;
    ``sizes`` the current partition counts of the group's subscribed topics."""

    group_id: str
    member_id: str
    member_epoch: MemberEpoch
    now_ms: int
    owned: Collection[PartitionKey] | None
    topics: Collection[str] | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    instance_id: str | None
    sizes: Mapping[str, int]


class Liveness:
    """Fast heartbeats and member deadlines in one Redis, under one keyspace."""

    def __init__(self, redis: Redis, keys: Keyspace) -> None:
        self.redis = redis
        self.keys = keys
        self._fast_heartbeat = redis.register_script(FAST_HEARTBEAT_SCRIPT)

    @reaching_redis
    async def fast_heartbeat(self, beat: FastHeartbeat) -> Member | None:
        """Record a stable member's heartbeat in one script; None if it needs the full path.

        No lock: the script is atomic and writes nothing a group transaction watches.
        """
        g = beat.group_id
        raw = await self._fast_heartbeat(
            keys=[self.keys.group(g), self.keys.deadlines, self.keys.beats(g)],
            args=[
                g,
                beat.member_id,
                beat.member_epoch,
                beat.now_ms,
                "*" if beat.owned is None else partitions_key(beat.owned),
                "*" if beat.topics is None else topics_key(beat.topics),
                beat.session_timeout_ms,
                beat.rebalance_timeout_ms,
                beat.instance_id or "",
                orjson.dumps(dict(beat.sizes)),
            ],
        )
        return None if raw is None else Member.from_json(orjson.loads(raw))

    @reaching_redis
    async def due_groups(self, now_ms: int, limit: int = 500) -> set[str]:
        """Groups that have a member past its deadline (for the expiry sweep)."""
        due = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.keys.deadlines, "-inf", now_ms, 0, limit),
        )
        return {entry.split(b"\0", 1)[0].decode() for entry in due}

    @reaching_redis
    async def groups_due_between(self, after_ms: int, until_ms: int) -> set[str]:
        """Groups that have a member whose deadline lies in ``(after_ms, until_ms]``."""
        due = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.keys.deadlines, f"({after_ms}", until_ms),
        )
        return {entry.split(b"\0", 1)[0].decode() for entry in due}

    @reaching_redis
    async def last_sweep(self) -> int | None:
        """When any coordinator process last swept (epoch ms); None if none ever did."""
        raw = await self.redis.get(self.keys.swept)
        return None if raw is None else int(raw)

    @reaching_redis
    async def record_sweep(self, now_ms: int) -> None:
        await self.redis.set(self.keys.swept, now_ms)

    @reaching_redis
    async def prune_deadlines(self, group_id: str, now_ms: int, alive: Iterable[str]) -> None:
        """Drop due deadline entries of the group's members that no longer exist."""
        due = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.keys.deadlines, "-inf", now_ms, 0, 10_000),
        )
        keep = set(alive)
        stale = []
        for entry in due:
            group, _, member = entry.decode().partition("\0")
            if group == group_id and member not in keep:
                stale.append(entry)
        if stale:
            await self.redis.zrem(self.keys.deadlines, *stale)
