"""Test driver: the group state machine and store against real Redis with an explicit clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from redis.asyncio import Redis

from headwater.topic_partition import PartitionKey
from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator.group import GroupState, HeartbeatRequest, HeartbeatResult
from headwater_coordinator.store.groups import GroupStore
from headwater_coordinator.store.keyspace import Keyspace
from headwater_coordinator.store.liveness import FastHeartbeat, Liveness
from headwater_coordinator.store.offsets import OffsetStore, PartitionOffset

REDIS_URL = "redis://127.0.0.1:6379/0"
SESSION_MS = 10_000


class StoreDriver:
    """Runs store operations on its own event loop so sync tests (and hypothesis) can call them."""

    def __init__(self, prefix: str, retention_ms: int = 60_000) -> None:
        self.loop = asyncio.new_event_loop()
        self.redis = Redis.from_url(REDIS_URL)
        self.keys = Keyspace(prefix)
        self.groups = GroupStore(self.redis, self.keys, retention_ms)
        self.offsets = OffsetStore(self.redis, self.keys, retention_ms)
        self.liveness = Liveness(self.redis, self.keys)
        self.sizes: dict[str, int] = {}
        self.fast_heartbeats = 0

    def close(self) -> None:
        self.loop.run_until_complete(self.redis.aclose())
        self.loop.close()

    def heartbeat(
        self,
        group: str,
        *,
        now: int,
        epoch: int,
        member_id: str | None = None,
        topics: Iterable[str] | None = None,
        owned: Iterable[PartitionKey] | None = None,
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
        assignor: str | None = None,
    ) -> HeartbeatResult:
        request = HeartbeatRequest(
            member_id=member_id,
            member_epoch=MemberEpoch(epoch),
            instance_id=instance_id,
            topics=frozenset(topics) if topics is not None else None,
            owned=set(owned) if owned is not None else None,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=60_000,
            assignor=assignor,
        )

        if epoch > 0 and member_id is not None:
            # The coordinator's fast path first, as Coordinator.heartbeat does.
            subscribed = self.load(group).subscribed_topics
            member = self.loop.run_until_complete(
                self.liveness.fast_heartbeat(
                    FastHeartbeat(
                        group_id=group,
                        member_id=member_id,
                        member_epoch=MemberEpoch(epoch),
                        now_ms=now,
                        owned=request.owned,
                        topics=request.topics,
                        session_timeout_ms=session_ms,
                        rebalance_timeout_ms=60_000,
                        instance_id=instance_id,
                        sizes={t: n for t, n in self.sizes.items() if t in subscribed and n > 0},
                    )
                )
            )
            if member is not None:
                self.fast_heartbeats += 1
                return HeartbeatResult(member.member_id, member.epoch, member.assigned, False)

        async def operation(state: GroupState) -> HeartbeatResult:
            fenced = await self.groups.is_fenced(group, member_id)
            return state.heartbeat(request, now, self.sizes, fenced=fenced)

        return self.loop.run_until_complete(self.groups.transact(group, operation)).result

    def sweep(self, group: str, now: int) -> list[str]:
        async def operation(state: GroupState) -> list[str]:
            gone = state.expire(now)
            if gone:
                state.refresh_topics(self.sizes)
                state.compute_target()
            return gone

        return self.loop.run_until_complete(self.groups.transact(group, operation)).result

    def load(self, group: str) -> GroupState:
        return self.loop.run_until_complete(self.groups.load(group))

    def commit(
        self,
        group: str,
        member_id: str | None,
        epoch: int,
        offsets: Mapping[tuple[str, int], int],
        *,
        now: int = 0,
    ) -> None:
        entries = [PartitionOffset(t, PartitionId(p), Offset(o)) for (t, p), o in offsets.items()]
        self.loop.run_until_complete(
            self.offsets.commit(
                group, entries, member_id=member_id, member_epoch=MemberEpoch(epoch), now_ms=now
            )
        )

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        rows = self.loop.run_until_complete(self.offsets.committed(group))
        return {(c.topic, int(c.partition)): int(c.offset) for c in rows}


def assert_no_double_owner(state: GroupState) -> None:
    seen: dict[PartitionKey, str] = {}
    for member in state.members.values():
        assert not (member.assigned & member.revoking)
        for tp in member.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
            seen[tp] = member.member_id


class Client:
    """A member as a well-behaved consumer runs it: reports what it owns, adopts its answer."""

    def __init__(self, driver: StoreDriver, group: str, topics: set[str], **kw: object) -> None:
        self.driver, self.group, self.topics, self.kw = driver, group, topics, kw
        self.member_id: str | None = None
        self.epoch = 0
        self.owned: set[PartitionKey] = set()

    def beat(self, now: int) -> HeartbeatResult:
        result = self.driver.heartbeat(
            self.group,
            now=now,
            epoch=self.epoch,
            member_id=self.member_id,
            topics=self.topics,
            owned=self.owned,
            **self.kw,  # type: ignore[arg-type]  # instance_id / session_ms pass-through
        )
        self.member_id, self.epoch, self.owned = (
            result.member_id,
            result.member_epoch,
            set(result.assignment),
        )
        return result


def settle(clients: list[Client], now: int, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.beat(now)


def all_partitions(topic: str, n: int) -> set[PartitionKey]:
    return {PartitionKey(topic, PartitionId(p)) for p in range(n)}
