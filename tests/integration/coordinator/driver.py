"""Test driver: the group state machine and store against real Redis with an explicit clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from redis.asyncio import Redis

from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator.assignor import TopicPartition
from headwater_coordinator.group import GroupState, HeartbeatRequest, HeartbeatResult
from headwater_coordinator.store import GroupStore

REDIS_URL = "redis://127.0.0.1:6379/0"
SESSION_MS = 10_000


class StoreDriver:
    """Runs store operations on its own event loop so sync tests (and hypothesis) can call them."""

    def __init__(self, prefix: str, retention_ms: int = 60_000) -> None:
        self.loop = asyncio.new_event_loop()
        self.redis = Redis.from_url(REDIS_URL)
        self.store = GroupStore(self.redis, prefix, retention_ms)
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
        owned: Iterable[TopicPartition] | None = None,
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
                self.store.fast_heartbeat(
                    group,
                    member_id,
                    epoch,
                    now,
                    request.owned,
                    request.topics,
                    session_ms,
                    60_000,
                    instance_id,
                    {t: n for t, n in self.sizes.items() if t in subscribed and n > 0},
                )
            )
            if member is not None:
                self.fast_heartbeats += 1
                return HeartbeatResult(member.member_id, member.epoch, member.assigned, False)

        async def operation(state: GroupState) -> HeartbeatResult:
            fenced = await self.store.is_fenced(group, member_id)
            return state.heartbeat(request, now, self.sizes, fenced=fenced)

        result, _ = self.loop.run_until_complete(self.store.transact(group, operation))
        return result

    def sweep(self, group: str, now: int) -> list[str]:
        async def operation(state: GroupState) -> list[str]:
            gone = state.expire(now)
            if gone:
                state.refresh_topics(self.sizes)
                state.compute_target()
            return gone

        gone, _ = self.loop.run_until_complete(self.store.transact(group, operation))
        return gone

    def load(self, group: str) -> GroupState:
        return self.loop.run_until_complete(self.store.load(group))

    def commit(
        self,
        group: str,
        member_id: str | None,
        epoch: int,
        offsets: Mapping[tuple[str, int], int],
        now: int = 0,
    ) -> None:
        entries = [(t, PartitionId(p), Offset(o), "") for (t, p), o in offsets.items()]
        self.loop.run_until_complete(
            self.store.commit(group, member_id, MemberEpoch(epoch), entries, now)
        )

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        rows = self.loop.run_until_complete(self.store.committed(group))
        return {(c.topic, int(c.partition)): int(c.offset) for c in rows}


def assert_no_double_owner(state: GroupState) -> None:
    seen: dict[TopicPartition, str] = {}
    for member in state.members.values():
        assert not (member.assigned & member.revoking)
        for tp in member.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
            seen[tp] = member.member_id
