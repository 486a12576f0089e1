"""Committed offsets in real Redis: commits only from the partition's owner at an epoch it may
hold, zombies rejected after expiry, and the offsets retention of an empty group."""

from __future__ import annotations

import pytest

from headwater.groups.errors import (
    FencedMemberEpochError,
    GroupNotEmptyError,
    PartitionNotOwnedError,
    StaleMemberEpochError,
    UnknownMemberError,
)
from tests.integration.coordinator.driver import Client, StoreDriver, all_partitions, settle
from tests.support import unique

T0 = 1_000_000


def test_commits_only_from_the_owner_at_its_epoch(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 2}
    a, b = Client(driver, group, {topic}), Client(driver, group, {topic})
    settle([a, b], T0)
    (mine,) = [p for t, p in a.owned]
    (theirs,) = [p for t, p in b.owned]
    driver.commit(group, a.member_id, a.epoch, {(topic, mine): 7})
    # A rebalance that leaves a's partitions alone moves it to a new epoch it has not heard of
    # yet; its commits at the epoch it knows stay valid.
    c = Client(driver, group, {unique("other")})
    c.beat(T0)
    assert driver.load(group).members[a.member_id or ""].epoch == a.epoch + 1
    driver.commit(group, a.member_id, a.epoch, {(topic, mine): 7})
    with pytest.raises(PartitionNotOwnedError):
        driver.commit(group, a.member_id, a.epoch, {(topic, theirs): 7})
    with pytest.raises(StaleMemberEpochError):
        driver.commit(group, a.member_id, 0, {(topic, mine): 8})  # older than it ever knew
    with pytest.raises(FencedMemberEpochError):
        driver.commit(group, a.member_id, a.epoch + 5, {(topic, mine): 8})
    with pytest.raises(UnknownMemberError):
        driver.commit(group, "zombie", a.epoch, {(topic, mine): 8})
    with pytest.raises(GroupNotEmptyError):
        driver.commit(group, None, -1, {(topic, mine): 8})
    assert driver.committed(group) == {(topic, mine): 7}


def test_zombie_commit_after_expiry_is_rejected(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 2}
    zombie, live = Client(driver, group, {topic}), Client(driver, group, {topic})
    settle([zombie, live], T0)
    settle([live], T0 + 9_000, rounds=1)
    driver.sweep(group, T0 + 10_000)
    settle([live], T0 + 10_000)
    assert live.owned == all_partitions(topic, 2)
    with pytest.raises(UnknownMemberError):
        driver.commit(group, zombie.member_id, zombie.epoch, {(topic, 0): 99})
    driver.commit(group, live.member_id, live.epoch, {(topic, 0): 5})
    assert driver.committed(group) == {(topic, 0): 5}


def test_empty_group_offsets_get_the_retention_ttl(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 1}
    driver.commit(group, None, -1, {(topic, 0): 3})  # simple commit, no members
    ttl = driver.loop.run_until_complete(driver.redis.pttl(driver.keys.offsets(group)))
    assert 59_000 < ttl <= 60_000
    a = Client(driver, group, {topic})
    a.beat(T0)  # a member: offsets no longer expire
    assert driver.loop.run_until_complete(driver.redis.pttl(driver.keys.offsets(group))) == -1
    a.epoch = -1
    a.beat(T0)
    ttl = driver.loop.run_until_complete(driver.redis.pttl(driver.keys.offsets(group)))
    assert 59_000 < ttl <= 60_000
    assert driver.committed(group) == {(topic, 0): 3}
