"""Metadata followers on SQLite and PostgreSQL: several brokers' images converge while the
controller writes, listeners see every change once and in order, a pruned offset reloads."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import pytest
import sqlalchemy as sa

from headwater_broker.cluster import session
from headwater_broker.cluster.image import (
    BrokerChanged,
    ImageReloaded,
    MetadataEvent,
    MetadataImage,
    PartitionChanged,
    TopicChanged,
    TopicDeleted,
)
from headwater_broker.cluster.metadata_follower import MetadataFollower
from headwater_broker.cluster.state import BrokerStateName
from tests.integration.cluster.conftest import Cluster, settle

pytestmark = pytest.mark.anyio


class Recorder:
    """A listener that keeps every event and the offset of every image it was shown."""

    def __init__(self) -> None:
        self.events: list[MetadataEvent] = []
        self.offsets: list[int] = []

    def __call__(self, image: MetadataImage, events: Sequence[MetadataEvent]) -> None:
        self.events.extend(events)
        self.offsets.append(image.offset)


async def test_followers_polling_on_their_own_converge_on_the_same_image(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await cluster.members(0, 1, 2)
    ctl = members[0]
    assert await ctl.controller.campaign_or_renew()
    ctl.hold_lease(background)
    await settle(members, ctl)
    # Three more brokers, each following on its own connection with a real polling task.
    followers = [MetadataFollower(cluster.store(), poll_ms=20) for _ in range(3)]
    recorders = [Recorder() for _ in followers]
    for follower, recorder in zip(followers, recorders, strict=True):
        await follower.load()
        follower.add_listener(recorder)
        background.append(asyncio.create_task(follower.run()))
    start = followers[0].image.offset
    assert all(f.image.offset == start for f in followers)

    for i in range(8):
        await ctl.controller.create_topic(f"conv-{i}", 4, replication_factor=2)
        if i % 3 == 0:
            await asyncio.sleep(0.03)  # let some polls land between writes
    await ctl.controller.alter_configs("conv-0", {"retention.ms": 99})
    await ctl.controller.delete_topic("conv-1")
    await ctl.controller.create_partitions("conv-2", 6)
    end = (await ctl.store.call(ctl.store.read_controller)).last_change

    async def converged() -> None:
        while any(f.image.offset < end for f in followers):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(converged(), 10)
    snapshot = await ctl.store.call(ctl.store.read_snapshot)
    for follower in followers:
        assert follower.image == snapshot == ctl.follower.image
    # Each listener saw every change once, in log order, whatever its polls' batching.
    first = recorders[0].events
    assert len(first) == end - start
    assert all(r.events == first for r in recorders)
    assert all(r.offsets == sorted(r.offsets) for r in recorders)
    kinds = [type(e) for e in first]
    assert kinds.count(TopicChanged) == 8 + 2  # created, configs altered, partitions added
    assert kinds.count(TopicDeleted) == 1
    assert kinds.count(PartitionChanged) == 8 * 4 + 2


async def test_a_fenced_leader_reaches_listeners_as_leader_changes(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await cluster.members(0, 1)
    ctl = members[0]
    assert await ctl.controller.campaign_or_renew()
    ctl.hold_lease(background)
    await settle(members, ctl)
    await ctl.controller.create_topic("watched", 2, replication_factor=2)
    await members[1].catch_up()
    recorder = Recorder()
    members[1].follower.add_listener(recorder)
    led_by_0 = [p.partition for p in ctl.follower.image.led_by(0)]
    # Broker 0's own session ends (clean exit) while it stays controller: fenced at once.
    await ctl.store.call(session.release, ctl.store, ctl.registration)
    await members[1].heartbeat()
    await ctl.controller.reconcile()
    await members[1].catch_up()
    fenced = [e for e in recorder.events if isinstance(e, BrokerChanged)]
    assert [(e.before.state if e.before else None, e.after.state) for e in fenced] == [
        (BrokerStateName.ACTIVE, BrokerStateName.FENCED)
    ]
    moved = [e for e in recorder.events if isinstance(e, PartitionChanged) and e.leader_changed]
    assert sorted(e.after.partition for e in moved) == sorted(led_by_0)
    assert all(e.after.leader == 1 and e.isr_changed for e in moved)


async def test_a_follower_whose_offset_was_pruned_reloads_a_snapshot(
    cluster: Cluster, background: list[asyncio.Task[None]]
) -> None:
    members = await cluster.members(0)
    ctl = members[0]
    assert await ctl.controller.campaign_or_renew()
    ctl.hold_lease(background)
    await settle(members, ctl)
    late = MetadataFollower(cluster.store(), poll_ms=20)
    await late.load()
    recorder = Recorder()
    late.add_listener(recorder)
    behind = late.image.offset
    await ctl.controller.create_topic("pruned-a", 1)
    await ctl.controller.create_topic("pruned-b", 1)
    await asyncio.sleep(0.02)
    assert await ctl.store.call(ctl.store.prune_changes, 1, 0, 0) > 0
    await late.poll()
    assert [type(e) for e in recorder.events] == [ImageReloaded]
    reloaded = recorder.events[0]
    assert isinstance(reloaded, ImageReloaded)
    assert reloaded.before_offset == behind
    assert late.image == (await ctl.store.call(ctl.store.read_snapshot))
    assert set(late.image.topics) == {"pruned-a", "pruned-b"}


async def test_a_failing_listener_does_not_stop_the_others(cluster: Cluster) -> None:
    store = cluster.store()
    follower = MetadataFollower(store, poll_ms=20)
    await follower.load()

    def broken(image: MetadataImage, events: Sequence[MetadataEvent]) -> None:
        raise RuntimeError("listener bug")

    recorder = Recorder()
    follower.add_listener(broken)
    follower.add_listener(recorder)
    assert store.campaign(0, 60_000) is not None
    await follower.poll()  # the broken listener's error is logged, not raised
    assert recorder.offsets == [1]


async def test_the_follower_survives_any_failed_poll_and_catches_up(cluster: Cluster) -> None:
    """A poll that fails with an error no outage explains -- here the change log's table is
    gone (a statement error, not a lost connection) -- is logged and retried; the follower
    loop must not end, or the broker's image would stay frozen for good."""
    writer = cluster.store()
    follower = MetadataFollower(cluster.store(), poll_ms=20)
    await follower.load()
    run = asyncio.create_task(follower.run())
    try:
        with writer.write() as conn:
            conn.execute(sa.text("ALTER TABLE changes RENAME TO changes_away"))
        await asyncio.sleep(0.2)  # several polls fail meanwhile
        assert not run.done()
        with writer.write() as conn:
            conn.execute(sa.text("ALTER TABLE changes_away RENAME TO changes"))
        election = writer.campaign(0, 60_000)
        assert election is not None
        for _ in range(200):
            if follower.image.offset >= election.offset:
                break
            await asyncio.sleep(0.02)
        assert follower.image.offset == election.offset
        assert follower.lag_ms() == 0
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
