"""Committed offsets: the commit script that checks the committer, reads, and resets.

The seam: a commit is one Lua script that checks the member, its epoch and its ownership of
every partition and writes the offsets in the same step, so it needs neither the group's lock
nor a group transaction; resets (groups without members) are a WATCH on the group's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import WatchError
from redis.typing import EncodableT

from headwater.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupNotEmptyError,
    PartitionNotOwnedError,
    StaleMemberEpochError,
    UnknownMemberError,
)
from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator.store.connection import reaching_redis
from headwater_coordinator.store.keyspace import Keyspace

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


class PartitionOffset(NamedTuple):
    """An offset to store for one partition, with the committer's metadata.

    A NamedTuple: a commit builds one per partition (hundreds per request), and it costs half
    of a frozen dataclass.
    """

    topic: str
    partition: PartitionId
    offset: Offset
    metadata: str = ""


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: PartitionId
    offset: Offset
    metadata: str
    commit_timestamp: int


def _stored(offset: PartitionOffset, now_ms: int) -> bytes:
    return orjson.dumps(
        {"offset": offset.offset, "metadata": offset.metadata, "commit_timestamp": now_ms}
    )


class OffsetStore:
    """Committed offsets of every group in one Redis, under one keyspace."""

    def __init__(self, redis: Redis, keys: Keyspace, retention_ms: int) -> None:
        self.redis = redis
        self.keys = keys
        self.retention_ms = retention_ms
        self._commit = redis.register_script(COMMIT_SCRIPT)

    @reaching_redis
    async def commit(
        self,
        group_id: str,
        offsets: Iterable[PartitionOffset],
        *,
        member_id: str | None,
        member_epoch: MemberEpoch,
        now_ms: int,
    ) -> None:
        """Store offsets if the member owns every partition at an epoch it may hold (one
        script); without a member, only for a group that has none."""
        argv: list[Any] = [group_id, member_id or "", int(member_epoch), self.retention_ms]
        for o in offsets:
            argv += [o.topic, int(o.partition), _stored(o, now_ms)]
        keys = [
            self.keys.group(group_id),
            self.keys.offsets(group_id),
            self.keys.fenced(group_id, member_id or ""),
            self.keys.groups,
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

    @reaching_redis
    async def committed(self, group_id: str) -> list[CommittedOffset]:
        """The group's committed offsets, sorted by topic and partition."""
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.keys.offsets(group_id)))
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

    @reaching_redis
    async def replace(self, group_id: str, offsets: Sequence[PartitionOffset], now_ms: int) -> None:
        """Overwrite committed offsets of a group that has no members (an offsets reset)."""
        key = self.keys.group(group_id)
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
                    values: dict[EncodableT, EncodableT] = {
                        f"{o.topic}:{int(o.partition)}": _stored(o, now_ms) for o in offsets
                    }
                    if values:
                        pipe.hset(self.keys.offsets(group_id), mapping=values)
                    pipe.pexpire(self.keys.offsets(group_id), self.retention_ms)
                    pipe.sadd(self.keys.groups, group_id)
                    await pipe.execute()
                    return
                except WatchError:
                    continue
