"""The group state machine stored in real Redis: joins, cooperative moves, expiry, static
members and fencing, driven with an explicit clock."""

from __future__ import annotations

import pytest

from headwater.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    UnknownMemberError,
)
from tests.integration.coordinator.driver import (
    Client,
    StoreDriver,
    all_partitions,
    assert_no_double_owner,
    settle,
)
from tests.support import unique

T0 = 1_000_000


def test_three_members_get_disjoint_complete_assignments(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 12}
    clients = [Client(driver, group, {topic}) for _ in range(3)]
    for c in clients:
        c.beat(T0)
        assert_no_double_owner(driver.load(group))
    settle(clients, T0)
    state = driver.load(group)
    assert state.status == "Stable"
    assert sorted(len(c.owned) for c in clients) == [4, 4, 4]
    assert set().union(*(c.owned for c in clients)) == all_partitions(topic, 12)
    assert {c.epoch for c in clients} == {state.epoch} == {3}
    before = driver.fast_heartbeats
    settle(clients, T0 + 5_000, rounds=1)  # stable members: liveness only, in one script
    assert driver.fast_heartbeats == before + 3
    assert {m.last_heartbeat_ms for m in driver.load(group).members.values()} == {T0 + 5_000}


def test_a_partition_moves_only_after_its_owner_released_it(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 4}
    a, b = Client(driver, group, {topic}), Client(driver, group, {topic})
    a.beat(T0)
    assert a.owned == all_partitions(topic, 4)
    b.beat(T0)
    assert b.owned == set()  # a still owns everything
    state = driver.load(group)
    assert len(state.members[b.member_id or ""].target) == 2
    a.beat(T0)  # a learns it must give up two partitions
    assert len(a.owned) == 2
    assert len(driver.load(group).members[a.member_id or ""].revoking) == 2
    b.beat(T0)  # not released yet: a has not confirmed
    assert b.owned == set()
    a.beat(T0)  # a reports it owns only two now
    b.beat(T0)
    assert a.owned | b.owned == all_partitions(topic, 4)
    assert not a.owned & b.owned
    assert driver.load(group).status == "Stable"


def test_an_expired_member_partitions_move_to_the_others(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 12}
    clients = [Client(driver, group, {topic}) for _ in range(3)]
    settle(clients, T0)
    dead, *alive = clients
    later = T0 + 9_000
    settle(alive, later, rounds=1)  # the survivors keep their sessions alive
    assert driver.sweep(group, T0 + 10_000) == [dead.member_id]
    settle(alive, T0 + 10_000)
    assert sorted(len(c.owned) for c in alive) == [6, 6]
    assert alive[0].owned | alive[1].owned == all_partitions(topic, 12)
    with pytest.raises(UnknownMemberError):
        dead.beat(T0 + 10_001)


def test_leave_releases_partitions_at_once(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 6}
    a, b = Client(driver, group, {topic}), Client(driver, group, {topic})
    settle([a, b], T0)
    a.epoch = -1
    assert a.beat(T0).member_epoch == -1
    settle([b], T0)
    assert b.owned == all_partitions(topic, 6)


def test_new_partitions_and_topics_are_picked_up(driver: StoreDriver) -> None:
    group, t1, t2 = unique("g"), unique("t"), unique("t")
    driver.sizes = {t1: 2}
    a, b = Client(driver, group, {t1, t2}), Client(driver, group, {t1, t2})
    settle([a, b], T0)
    assert a.owned | b.owned == all_partitions(t1, 2)
    driver.sizes = {t1: 4, t2: 2}
    settle([a, b], T0)
    assert a.owned | b.owned == all_partitions(t1, 4) | all_partitions(t2, 2)
    assert sorted([len(a.owned), len(b.owned)]) == [3, 3]


def test_static_member_returns_to_its_partitions_without_rebalance(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 6}
    a = Client(driver, group, {topic}, instance_id="host-a")
    b = Client(driver, group, {topic}, instance_id="host-b")
    settle([a, b], T0)
    epoch_before, a_partitions = driver.load(group).epoch, set(a.owned)
    a.epoch = -2  # static leave: partitions stay reserved
    a.beat(T0)
    again = Client(driver, group, {topic}, instance_id="host-a")
    again.beat(T0 + 5_000)
    assert again.owned == a_partitions
    assert driver.load(group).epoch == epoch_before  # no rebalance
    # The replaced member id is fenced with its own code, for heartbeats and commits.
    a.epoch = again.epoch
    with pytest.raises(FencedInstanceIdError):
        a.beat(T0 + 5_001)
    with pytest.raises(FencedInstanceIdError):
        driver.commit(group, a.member_id, again.epoch, {(topic, 0): 1})


def test_wrong_epoch_is_fenced_and_changes_nothing(driver: StoreDriver) -> None:
    group, topic = unique("g"), unique("t")
    driver.sizes = {topic: 2}
    a = Client(driver, group, {topic})
    a.beat(T0)
    before = driver.load(group).members[a.member_id or ""].to_json()
    with pytest.raises(FencedMemberEpochError):
        driver.heartbeat(group, now=T0 + 1, epoch=a.epoch + 5, member_id=a.member_id)
    assert driver.load(group).members[a.member_id or ""].to_json() == before
