"""The controller with several candidates on one metadata database (SQLite and PostgreSQL),
driven step by step: election, lease takeover, fencing of a stale controller, broker liveness,
leader election, ISR compare-and-set, topic admin, reassignment, controlled shutdown."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from headwater.errors import (
    FencedLeaderEpochError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NotControllerError,
    PartitionNotFoundError,
    StaleControllerEpochError,
    StalePartitionEpochError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)
from headwater.types import BrokerId
from headwater_broker.cluster import session
from headwater_broker.cluster.controller import Controller
from headwater_broker.cluster.election import IsrMember, IsrProposal
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.cluster.state import (
    NO_LEADER,
    BrokerStateName,
    ChangeOffset,
    ControllerEpoch,
    ControllerInfo,
    LeaderEpoch,
    PartitionState,
)
from tests.integration.cluster.conftest import (
    Cluster,
    Member,
    fast_settings,
    keep_alive,
    settle,
    wait_contact,
)

pytestmark = pytest.mark.anyio


def ids(*values: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(v) for v in values)


def states(image: MetadataImage) -> dict[int, BrokerStateName]:
    return {b.broker_id: b.state for b in image.brokers.values()}


async def elect(member: Member) -> None:
    assert await member.controller.campaign_or_renew()


async def take_over(member: Member, settings: ClusterSettings) -> None:
    """Campaign until ``member`` is controller, right after the old lease ran out (bounded: on a
    loaded machine one campaign can still meet the old lease by a few milliseconds of the
    store's clock, or time out catching up with its own election)."""
    deadline = time.monotonic() + settings.controller_lease_ms / 1000 + 5
    while not await member.controller.campaign_or_renew():
        assert time.monotonic() < deadline, f"broker {member.broker_id} was never elected"
        await asyncio.sleep(0.05)


async def started(
    cluster: Cluster, background: list[asyncio.Task[None]] | None, *broker_ids: int
) -> list[Member]:
    """Members registered and active, the first one controller, renewing its lease in the
    background unless ``background`` is None (the test lets the lease lapse itself)."""
    members = await cluster.members(*broker_ids)
    await elect(members[0])
    if background is not None:
        members[0].hold_lease(background)
    await settle(members, members[0])
    assert all(m.follower.image.is_active(m.broker_id, m.registration.epoch) for m in members)
    return members


def proposal(p: PartitionState, members: dict[int, Member], isr: list[int]) -> IsrProposal:
    return IsrProposal(
        topic=p.topic,
        partition=p.partition,
        leader_id=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        isr=tuple(IsrMember(BrokerId(b), members[b].registration.epoch) for b in isr),
    )


async def test_exactly_one_of_three_candidates_is_elected(cluster: Cluster) -> None:
    members = await cluster.members(0, 1, 2)
    results = await asyncio.gather(*(m.controller.campaign_or_renew() for m in members))
    assert sorted(results) == [False, False, True]
    winner = members[results.index(True)]
    assert winner.controller.epoch == 1
    for m in members:
        await m.catch_up()
        assert m.follower.image.controller == ControllerInfo(
            BrokerId(winner.broker_id), ControllerEpoch(1)
        )
    # Renewing keeps it; the others keep losing while the lease is held.
    assert await winner.controller.campaign_or_renew()
    for m in members:
        if m is not winner:
            assert not await m.controller.campaign_or_renew()


async def test_a_paused_controller_is_replaced_and_every_write_it_then_tries_is_refused(
    cluster: Cluster,
) -> None:
    members = await started(cluster, None, 0, 1, 2)
    old = members[0]
    await old.controller.create_topic("before", 1)
    # The old controller's process "pauses": its clock stops, so on resume it still believes
    # its lease valid -- exactly what a SIGSTOP does. Only the epoch check can stop it now.
    frozen = time.monotonic()
    paused = Controller(old.store, old.follower, cluster.settings, 0, clock=lambda: frozen)
    paused.lease.held = old.controller.lease.held
    assert paused.active
    await asyncio.sleep(cluster.settings.controller_lease_ms / 1000 + 0.1)
    new = members[1]
    await take_over(new, cluster.settings)
    assert new.controller.epoch == 2
    log_end = (await new.store.call(new.store.read_controller)).last_change

    with pytest.raises(StaleControllerEpochError, match="the controller is broker 1 at epoch 2"):
        await paused.create_topic("during-pause", 1)
    assert not paused.active  # it stepped down when the store refused it
    with pytest.raises(NotControllerError):
        await paused.delete_topic("before")
    # The store holds nothing from epoch 1 after the takeover, and the topics are as they were.
    image = await new.store.call(new.store.read_snapshot)
    assert set(image.topics) == {"before"}
    assert image.offset == log_end
    changes = await new.store.call(new.store.read_all_changes)
    takeover = next(
        c.offset for c in changes if c.record == ControllerInfo(BrokerId(1), ControllerEpoch(2))
    )
    assert [c for c in changes if c.controller_epoch == 1 and c.offset > takeover] == []
    # The new controller works.
    await new.controller.create_topic("after", 1)
    assert set(new.follower.image.topics) == {"before", "after"}


async def test_a_controller_whose_lease_ran_out_stops_acting_by_its_own_clock(
    cluster: Cluster,
) -> None:
    members = await started(cluster, None, 0, 1)
    ctl = members[0].controller
    await asyncio.sleep(cluster.settings.controller_lease_ms / 1000 + 0.05)
    assert not ctl.active
    with pytest.raises(NotControllerError, match="Broker 0 is not the controller"):
        await ctl.create_topic("late", 1)
    assert not await ctl.campaign_or_renew()  # steps down; no one else campaigned yet
    assert ctl.lease.held is None
    # Nobody took over: it may win again, with a new epoch.
    assert await ctl.campaign_or_renew()
    assert ctl.epoch == 2


async def test_a_broker_that_stops_heartbeating_is_fenced_and_its_leaderships_move(
    cluster: Cluster,
    background: list[asyncio.Task[None]],
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    by_id = {m.broker_id: m for m in members}
    ctl = members[0]
    topic = await ctl.controller.create_topic("orders", 3)
    assert topic.partitions == 3
    before = {p.partition: p for p in ctl.follower.image.partitions_of("orders")}
    assert sorted(p.leader for p in before.values()) == [0, 1, 2]
    assert all(p.replicas == p.isr and len(p.replicas) == 3 for p in before.values())

    await wait_contact(ctl.store, cluster.settings.session_timeout_ms)
    # Broker 2 goes silent; 0 and 1 keep heartbeating.
    await keep_alive([by_id[0], by_id[1]], ctl, cluster.settings.session_timeout_ms / 1000 + 0.2)
    await ctl.controller.reconcile()

    snapshot = await by_id[1].store.call(
        by_id[1].store.read_snapshot
    )  # read through another broker's connection
    assert states(snapshot) == {
        0: BrokerStateName.ACTIVE,
        1: BrokerStateName.ACTIVE,
        2: BrokerStateName.FENCED,
    }
    for p in snapshot.partitions_of("orders"):
        old = before[p.partition]
        assert 2 not in p.isr
        assert p.leader != 2
        assert p.partition_epoch == old.partition_epoch + 1
        if old.leader == 2:
            # The next in-sync replica in replica order took over, with a new leader epoch.
            assert p.leader == next(r for r in old.replicas if r != 2)
            assert p.leader_epoch == old.leader_epoch + 1
        else:
            assert (p.leader, p.leader_epoch) == (old.leader, old.leader_epoch)
    fenced_at = snapshot.brokers[BrokerId(2)].fenced_change

    # Broker 2 comes back: heartbeats, but has not applied its fencing yet -> still fenced.
    await by_id[2].heartbeat()
    await ctl.controller.reconcile()
    assert ctl.follower.image.brokers[BrokerId(2)].state is BrokerStateName.FENCED
    # It catches up with the metadata, reports it, and is unfenced.
    await by_id[2].catch_up()
    assert by_id[2].follower.image.offset >= fenced_at
    await by_id[2].heartbeat()
    await ctl.controller.reconcile()
    assert ctl.follower.image.brokers[BrokerId(2)].state is BrokerStateName.ACTIVE
    # Its old partition's leader proposes it back into the ISR; the preferred leader returns.
    lost = next(p for p in before.values() if p.leader == 2)
    current = ctl.follower.image.partition("orders", lost.partition)
    assert current is not None
    grown = await ctl.controller.alter_isr(proposal(current, by_id, list(current.replicas)))
    assert grown.isr == current.replicas
    await ctl.controller.reconcile()
    back = ctl.follower.image.partition("orders", lost.partition)
    assert back is not None
    assert (back.leader, back.leader_epoch) == (2, current.leader_epoch + 1)


async def test_a_new_controller_waits_one_session_of_contact_before_fencing(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    # A session long enough that the grace is still running when the test checks it.
    cluster = Cluster(
        cluster.url, cluster.stores, fast_settings(cluster.url, session_timeout_ms=2000)
    )
    session_s = cluster.settings.session_timeout_ms / 1000
    members = await started(cluster, None, 0, 1)
    # Nobody heartbeats or renews: both sessions look dead and the lease runs out.
    await asyncio.sleep(max(session_s, cluster.settings.controller_lease_ms / 1000) + 0.1)
    fresh = await cluster.member(5)  # a new process: its contact with the database just began
    await take_over(fresh, cluster.settings)
    fresh.hold_lease(background)
    await fresh.controller.reconcile()
    assert fresh.store.contact_ms() < cluster.settings.session_timeout_ms
    assert states(fresh.follower.image)[0] is BrokerStateName.ACTIVE
    assert states(fresh.follower.image)[1] is BrokerStateName.ACTIVE
    # Broker 1 heartbeats during the grace; broker 0 does not.
    await keep_alive([members[1], fresh], fresh, session_s / 2)
    await wait_contact(fresh.store, cluster.settings.session_timeout_ms)
    await members[1].heartbeat()
    await fresh.heartbeat()
    await fresh.controller.reconcile()
    assert states(fresh.follower.image)[0] is BrokerStateName.FENCED
    assert states(fresh.follower.image)[1] is BrokerStateName.ACTIVE


async def test_a_restarted_broker_is_recorded_again_and_loses_its_leaderships(
    cluster: Cluster,
    background: list[asyncio.Task[None]],
) -> None:
    members = await started(cluster, background, 0, 1)
    ctl = members[0]
    await ctl.controller.create_topic("t", 2, replication_factor=2)
    led = [p for p in ctl.follower.image.partitions_of("t") if p.leader == 1]
    assert len(led) == 1
    # Broker 1's process restarts (a new incarnation) within the session timeout.
    store = members[1].store
    await store.call(session.release, store, members[1].registration)
    again = await store.call(
        session.register,
        store,
        1,
        "http://127.0.0.1:19001",
        None,
        cluster.settings.session_timeout_ms,
    )
    assert again.epoch == 2
    await ctl.controller.reconcile()
    image = ctl.follower.image
    assert (image.brokers[BrokerId(1)].epoch, image.brokers[BrokerId(1)].state) == (
        2,
        BrokerStateName.FENCED,
    )
    moved = image.partition("t", led[0].partition)
    assert moved is not None
    assert (moved.leader, moved.isr) == (0, ids(0))


async def test_isr_proposals_are_compare_and_set_on_the_partition_epoch(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    by_id = {m.broker_id: m for m in members}
    ctl = members[0].controller
    await ctl.create_topic("isr", 1, replication_factor=3)
    p = ctl.follower.image.partitions_of("isr")[0]
    leader_follower = [b for b in p.replicas if b != p.leader]
    first = proposal(p, by_id, [p.leader, leader_follower[0]])
    second = proposal(p, by_id, [p.leader, leader_follower[1]])
    results = await asyncio.gather(
        ctl.alter_isr(first), ctl.alter_isr(second), return_exceptions=True
    )
    assert isinstance(results[0], PartitionState)
    assert isinstance(results[1], StalePartitionEpochError)
    stored = (await by_id[1].store.call(by_id[1].store.read_snapshot)).partition("isr", 0)
    assert stored is not None
    assert stored.isr == tuple(b for b in p.replicas if b in (p.leader, leader_follower[0]))
    assert stored.partition_epoch == p.partition_epoch + 1
    # A leader that lost leadership (older leader epoch) is refused too, and nothing changes.
    old_leader = replace_leader_epoch(proposal(stored, by_id, [stored.leader]), -1)
    with pytest.raises(FencedLeaderEpochError):
        await ctl.alter_isr(old_leader)
    assert (await by_id[2].store.call(by_id[2].store.read_snapshot)).partition("isr", 0) == stored


def replace_leader_epoch(p: IsrProposal, delta: int) -> IsrProposal:
    return replace(p, leader_epoch=LeaderEpoch(p.leader_epoch + delta))


async def test_topic_admin_is_carried_out_by_the_controller(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    ctl = members[0].controller
    other = members[2]
    created = await ctl.create_topic("admin", 6, configs={"retention.ms": "1000"})
    assert created.configs == {"retention.ms": "1000"}
    parts = ctl.follower.image.partitions_of("admin")
    # Default factor min(3, active brokers) = 3; leaders spread evenly.
    assert [len(p.replicas) for p in parts] == [3] * 6
    assert sorted(p.leader for p in parts) == [0, 0, 1, 1, 2, 2]
    with pytest.raises(
        InvalidReplicationFactorError,
        match="factor 4 is larger than the number of active brokers, 3",
    ):
        await ctl.create_topic("too-wide", 1, replication_factor=4)
    with pytest.raises(TopicAlreadyExistsError):
        await ctl.create_topic("admin", 1)
    with pytest.raises(InvalidConfigError):
        await ctl.create_topic("bad", 1, configs={"nope": "1"})
    with pytest.raises(InvalidPartitionsError):
        await ctl.create_topic("empty", 0)

    grown = await ctl.create_partitions("admin", 8)
    assert grown.partitions == 8
    with pytest.raises(InvalidPartitionsError, match="has 8 partition"):
        await ctl.create_partitions("admin", 8)
    altered = await ctl.alter_configs(
        "admin", {"min.insync.replicas": 2, "segment.ms": "60000"}, delete=["retention.ms"]
    )
    assert altered.configs == {"min.insync.replicas": "2", "segment.ms": "60000"}

    await other.catch_up()
    seen = other.follower.image
    assert seen.topics["admin"] == altered
    assert [p.replicas for p in seen.partitions_of("admin")] == [
        p.replicas for p in ctl.follower.image.partitions_of("admin")
    ]
    assert len(seen.partitions_of("admin")) == 8
    await ctl.delete_topic("admin")
    with pytest.raises(TopicNotFoundError):
        await ctl.delete_topic("admin")
    await other.catch_up()
    assert "admin" not in other.follower.image.topics
    assert (await other.store.call(other.store.read_snapshot)).partitions_of("admin") == []


async def test_a_non_controller_refuses_admin_naming_nobody_or_the_controller(
    cluster: Cluster,
    background: list[asyncio.Task[None]],
) -> None:
    members = await started(cluster, background, 0, 1)
    with pytest.raises(NotControllerError) as refused:
        await members[1].controller.create_topic("x", 1)
    assert refused.value.to_body()["controller_id"] == 0
    assert refused.value.to_body()["controller_url"] == "http://127.0.0.1:19000"


async def test_unclean_election_happens_only_once_the_topic_allows_it(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, None, 0, 1)
    by_id = {m.broker_id: m for m in members}
    await members[0].controller.create_topic("risky", 1, replication_factor=2)
    p = members[0].follower.image.partitions_of("risky")[0]
    leader = p.leader
    survivor = by_id[next(b for b in p.replicas if b != leader)]
    # The controller runs on the surviving broker (hand it over if placement chose otherwise).
    if survivor is not members[0]:
        await members[0].controller.resign()
        await elect(survivor)
    survivor.hold_lease(background)
    ctl = survivor.controller
    # The follower falls out of sync; then the leader's broker goes away (its session ends).
    shrunk = await ctl.alter_isr(proposal(p, by_id, [leader]))
    assert shrunk.isr == ids(leader)
    await by_id[leader].store.call(session.release, by_id[leader].store, by_id[leader].registration)
    await survivor.heartbeat()
    await ctl.reconcile()
    offline = ctl.follower.image.partition("risky", 0)
    assert offline is not None
    assert (offline.leader, offline.isr) == (NO_LEADER, ids(leader))
    await ctl.alter_configs("risky", {"unclean.leader.election.enable": "true"})
    await ctl.reconcile()
    elected = (await by_id[leader].store.call(by_id[leader].store.read_snapshot)).partition(
        "risky", 0
    )
    assert elected is not None
    assert (elected.leader, elected.isr, elected.unclean) == (
        survivor.broker_id,
        ids(survivor.broker_id),
        True,
    )
    assert elected.leader_epoch == offline.leader_epoch + 1
    # The change that elected it says so, for the new leader to log what it truncates.
    change = (await survivor.store.call(survivor.store.read_all_changes))[-1]
    assert change.record == elected


async def test_controlled_shutdown_moves_every_leadership_off_the_broker(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    ctl = members[0].controller
    await ctl.create_topic("moving", 6, replication_factor=2)
    assert ctl.follower.image.led_by(2) != []
    still = await ctl.controlled_shutdown(2, members[2].registration.epoch)
    assert still == []
    image = await members[1].store.call(members[1].store.read_snapshot)
    assert image.brokers[BrokerId(2)].state is BrokerStateName.SHUTTING_DOWN
    assert image.led_by(2) == []
    assert all(2 not in p.isr for p in image.partitions_of("moving"))
    # It exits (session released): fenced; nothing else moves.
    await members[2].store.call(session.release, members[2].store, members[2].registration)
    for m in members[:2]:
        await m.heartbeat()
    changes = await ctl.reconcile()
    assert [c.record for c in changes] == [
        replace(
            image.brokers[BrokerId(2)],
            state=BrokerStateName.FENCED,
            fenced_change=changes[0].offset,
        )
    ]


async def test_a_reassignment_moves_a_partition_to_new_replicas(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    by_id = {m.broker_id: m for m in members}
    ctl = members[0].controller
    await ctl.create_topic("move", 1, replication_factor=1)
    p = ctl.follower.image.partitions_of("move")[0]
    source = p.leader
    targets = [b for b in (0, 1, 2) if b != source][:2]
    started_p = await ctl.reassign("move", 0, targets)
    assert started_p.adding == ids(*targets)
    assert started_p.removing == ids(source)
    assert started_p.leader == source  # the new replicas are not in sync yet
    # The leader proposes the new replicas into the ISR once they have caught up.
    joined = await ctl.alter_isr(proposal(started_p, by_id, [source, *targets]))
    assert set(joined.isr) == {source, *targets}
    await ctl.reconcile()
    done = (await members[1].store.call(members[1].store.read_snapshot)).partition("move", 0)
    assert done is not None
    assert (done.replicas, done.isr, done.adding, done.removing) == (
        ids(*targets),
        ids(*targets),
        (),
        (),
    )
    assert done.leader == targets[0]
    assert done.leader_epoch == p.leader_epoch + 1


async def test_followers_converge_on_the_controllers_image(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    ctl = members[0].controller
    for i in range(5):
        await ctl.create_topic(f"c{i}", 3, replication_factor=2)
    await ctl.delete_topic("c1")
    await ctl.alter_configs("c2", {"retention.ms": 5})
    for m in members:
        await m.catch_up()
    images = [m.follower.image for m in members]
    assert images[0] == images[1] == images[2]
    assert images[0] == (await members[2].store.call(members[2].store.read_snapshot))
    assert images[0].offset == ChangeOffset(
        (await members[0].store.call(members[0].store.read_controller)).last_change
    )


async def test_reassigning_to_the_replicas_of_before_cancels_a_move(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    ctl = members[0].controller
    await ctl.create_topic("back", 1, None, None, [[0]])
    before = ctl.follower.image.partitions_of("back")[0]
    moving = await ctl.reassign("back", 0, [1, 2])
    assert (moving.replicas, moving.adding, moving.removing) == (ids(1, 2, 0), ids(1, 2), ids(0))
    assert moving.leader == 0  # the new replicas are not in sync: the old one keeps leading
    cancelled = await ctl.reassign("back", 0, [0])
    assert (cancelled.replicas, cancelled.isr, cancelled.adding, cancelled.removing) == (
        ids(0),
        ids(0),
        (),
        (),
    )
    assert (cancelled.leader, cancelled.leader_epoch) == (0, before.leader_epoch)
    assert cancelled.partition_epoch == before.partition_epoch + 2
    stored = (await members[2].store.call(members[2].store.read_snapshot)).partition("back", 0)
    assert stored == cancelled


async def test_an_invalid_reassignment_is_refused_with_nothing_changed(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await started(cluster, background, 0, 1, 2)
    ctl = members[0].controller
    await ctl.create_topic("bad", 1, None, None, [[0, 1]])
    store = members[1].store
    before = await store.call(store.read_snapshot)
    for replicas in ([], [0, 0], [0, 9]):
        with pytest.raises(InvalidReplicaAssignmentError):
            await ctl.reassign("bad", 0, replicas)
    with pytest.raises(PartitionNotFoundError):
        await ctl.reassign("bad", 1, [0])
    with pytest.raises(TopicNotFoundError):
        await ctl.reassign("nope", 0, [0])
    assert await store.call(store.read_snapshot) == before


async def test_a_paused_controller_cannot_start_a_reassignment(cluster: Cluster) -> None:
    members = await started(cluster, None, 0, 1, 2)
    old = members[0]
    await old.controller.create_topic("held", 1, None, None, [[0]])
    frozen = time.monotonic()
    paused = Controller(old.store, old.follower, cluster.settings, 0, clock=lambda: frozen)
    paused.lease.held = old.controller.lease.held
    await asyncio.sleep(cluster.settings.controller_lease_ms / 1000 + 0.1)
    await take_over(members[1], cluster.settings)
    with pytest.raises(StaleControllerEpochError):
        await paused.reassign("held", 0, [1, 2])
    stored = (await members[1].store.call(members[1].store.read_snapshot)).partition("held", 0)
    assert stored is not None
    assert (stored.replicas, stored.adding, stored.removing) == (ids(0), (), ())
