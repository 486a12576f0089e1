"""Model-based test of the group state machine in real Redis: whatever the order of joins,
heartbeats, leaves, crashes, expiries and topic growth, no partition ever has two live owners,
and once everyone heartbeats the assignment is complete and balanced."""

from __future__ import annotations

import uuid

import pytest
import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from headwater.errors import HeadwaterError
from headwater.groups.errors import FencedInstanceIdError
from headwater.topic_partition import PartitionKey
from headwater.types import PartitionId
from tests.integration.coordinator.driver import (
    REDIS_URL,
    SESSION_MS,
    StoreDriver,
    assert_no_double_owner,
)

TOPICS = ("a", "b")


class SimClient:
    def __init__(self, topics: frozenset[str], instance_id: str | None) -> None:
        self.topics = topics
        self.instance_id = instance_id
        self.member_id: str | None = None
        self.epoch = 0
        self.owned: set[PartitionKey] = set()
        self.crashed = False


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"hwtest-model-{uuid.uuid4().hex[:10]}:"
        self.driver = StoreDriver(self.prefix)
        self.driver.sizes = {"a": 3, "b": 2}
        self.group = "g"
        self.now = 1_000_000
        self.clients: list[SimClient] = []
        self.assignor = "uniform"

    def teardown(self) -> None:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=self.prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()
        self.driver.close()

    def _beat(self, c: SimClient) -> None:
        try:
            result = self.driver.heartbeat(
                self.group,
                now=self.now,
                epoch=c.epoch,
                member_id=c.member_id,
                topics=c.topics,
                owned=c.owned,
                instance_id=c.instance_id,
                assignor=self.assignor,
            )
        except FencedInstanceIdError:
            # A newer process took over its static identity: this one must stop for good.
            c.member_id, c.epoch, c.owned, c.crashed = None, 0, set(), True
            return
        except HeadwaterError:
            # Fenced or expired: a real client drops everything and rejoins.
            c.member_id, c.epoch, c.owned = None, 0, set()
            return
        c.member_id, c.epoch, c.owned = result.member_id, result.member_epoch, result.assignment

    def live(self) -> list[SimClient]:
        members = self.driver.load(self.group).members
        return [c for c in self.clients if c.member_id in members and not c.crashed]

    @rule(
        topics=st.sets(st.sampled_from(TOPICS), min_size=1).map(frozenset),
        static=st.booleans(),
    )
    def join(self, topics: frozenset[str], static: bool) -> None:
        instance = f"i{len(self.clients) % 3}" if static else None
        c = SimClient(topics, instance)
        self.clients.append(c)
        self._beat(c)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self.clients))
        if not c.crashed:
            self._beat(c)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data(), static=st.booleans())
    def leave(self, data: st.DataObject, static: bool) -> None:
        c = data.draw(st.sampled_from(self.clients))
        if c.crashed or c.member_id is None:
            return
        c.epoch = -2 if static and c.instance_id else -1
        self._beat(c)
        c.crashed = True  # it is gone; it never heartbeats again

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        data.draw(st.sampled_from(self.clients)).crashed = True

    @rule(ms=st.integers(min_value=0, max_value=SESSION_MS + 2_000))
    def advance_clock_and_sweep(self, ms: int) -> None:
        self.now += ms
        self.driver.sweep(self.group, self.now)

    @rule(topic=st.sampled_from(TOPICS))
    def add_partition(self, topic: str) -> None:
        self.driver.sizes[topic] += 1

    @rule()
    def settle(self) -> None:
        """Everyone alive heartbeats until stable: the assignment must then be complete."""
        for _ in range(8):
            for c in self.clients:
                if not c.crashed:
                    self._beat(c)
        state = self.driver.load(self.group)
        if any(m.left_static or self._crashed(m.member_id) for m in state.members.values()):
            return  # a dead member still holds partitions until its session ends
        subscribed = state.subscribed_topics
        expected = {(t, PartitionId(p)) for t in subscribed for p in range(self.driver.sizes[t])}
        owned = [tp for c in self.live() for tp in c.owned]
        assert sorted(owned) == sorted(expected)
        assert state.status == ("Stable" if state.members else "Empty")

    def _crashed(self, member_id: str) -> bool:
        return any(c.crashed for c in self.clients if c.member_id == member_id)

    @invariant()
    def no_partition_has_two_live_owners(self) -> None:
        assert_no_double_owner(self.driver.load(self.group))
        seen: set[PartitionKey] = set()
        for c in self.live():
            assert not (c.owned & seen), f"{c.owned & seen} owned twice"
            seen |= c.owned


GroupMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestGroupStateMachine = pytest.mark.needs("redis")(GroupMachine.TestCase)
