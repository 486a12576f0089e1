"""Cluster nodes with their real background tasks (heartbeats, follower, controller loop) on
SQLite and PostgreSQL: one controller, takeover after a crash, fencing of the crashed broker,
admin at a non-controller, a duplicate broker id refused while the first keeps serving."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from headwater.errors import BrokerIdInUseError, NotControllerError
from headwater.types import BrokerId
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.session import read_sessions
from headwater_broker.cluster.state import BrokerStateName
from tests.integration.cluster.conftest import fast_settings
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.anyio


@pytest.fixture
async def nodes(metadata_url: str) -> AsyncIterator[Callable[[int], Awaitable[ClusterNode]]]:
    started: list[ClusterNode] = []

    async def start(broker_id: int) -> ClusterNode:
        node = ClusterNode(
            fast_settings(metadata_url), broker_id, f"http://127.0.0.1:{20000 + broker_id}"
        )
        await node.start()
        started.append(node)
        return node

    yield start
    for node in started:
        await node.stop()


async def test_nodes_elect_one_controller_and_converge(
    nodes: Callable[[int], Awaitable[ClusterNode]],
) -> None:
    cluster = [await nodes(i) for i in range(3)]
    await wait_until_async(lambda: sum(n.is_controller for n in cluster) == 1, 5)
    await wait_until_async(
        lambda: all(n.image.is_active(m.broker_id) for n in cluster for m in cluster),
        5,
    )
    controller = next(n for n in cluster if n.is_controller)
    other = next(n for n in cluster if not n.is_controller)
    with pytest.raises(NotControllerError) as refused:
        other.controller_for_admin()
    assert refused.value.to_body()["controller_id"] == controller.broker_id
    assert refused.value.to_body()["controller_url"] == controller.url
    await controller.controller_for_admin().create_topic("nodes", 3)
    end = (await controller.store.call(controller.store.read_controller)).last_change
    await wait_until_async(lambda: all(n.image.offset >= end for n in cluster), 5)
    assert all(len(n.image.partitions_of("nodes")) == 3 for n in cluster)
    assert cluster[0].image == cluster[1].image == cluster[2].image
    # Every broker reports the change it has applied with its heartbeat.
    await asyncio.sleep(0.3)
    _, sessions = await controller.store.call(read_sessions, controller.store)
    assert all(s.applied_change >= end for s in sessions)


async def test_a_crashed_controller_is_replaced_and_its_broker_fenced(
    nodes: Callable[[int], Awaitable[ClusterNode]],
) -> None:
    cluster = [await nodes(i) for i in range(3)]
    await wait_until_async(lambda: sum(n.is_controller for n in cluster) == 1, 5)
    await wait_until_async(
        lambda: all(n.image.is_active(m.broker_id) for n in cluster for m in cluster), 5
    )
    crashed = next(n for n in cluster if n.is_controller)
    await crashed.controller_for_admin().create_topic("failover", 3, replication_factor=2)
    old_epoch = crashed.image.controller.epoch
    survivors = [n for n in cluster if n is not crashed]
    await crashed.abandon()
    settings = survivors[0].settings
    began = time.monotonic()
    await wait_until_async(lambda: any(n.is_controller for n in survivors), 5)
    took = time.monotonic() - began
    assert took < (settings.controller_lease_ms + 1000) / 1000
    new = next(n for n in survivors if n.is_controller)
    assert new.controller.epoch == old_epoch + 1
    # The crashed broker is fenced once its session has been silent for the timeout (and the
    # new controller has had that long of database contact), and leads nothing any more.
    await wait_until_async(
        lambda: new.image.brokers[crashed.broker_id].state is BrokerStateName.FENCED,
        (settings.session_timeout_ms * 2 + 1000) / 1000,
    )
    await wait_until_async(lambda: new.image.led_by(crashed.broker_id) == [], 2)
    assert all(
        p.leader in (survivors[0].broker_id, survivors[1].broker_id)
        for p in new.image.partitions_of("failover")
    )
    # Admin works again, at the new controller.
    await new.controller_for_admin().create_topic("after-failover", 1)


async def test_a_second_broker_with_a_live_id_is_refused_and_the_first_keeps_serving(
    nodes: Callable[[int], Awaitable[ClusterNode]], metadata_url: str
) -> None:
    first = await nodes(4)
    impostor = ClusterNode(fast_settings(metadata_url), 4, "http://127.0.0.1:29999")
    with pytest.raises(
        BrokerIdInUseError,
        match=re.escape("Broker id 4 is in use by a live broker at http://127.0.0.1:20004"),
    ):
        await impostor.start()  # waits a session timeout; the first keeps heartbeating
    await asyncio.sleep(0.3)
    assert not first.replaced.is_set()
    assert first.image.brokers[BrokerId(4)].url == "http://127.0.0.1:20004"
    assert first.image.brokers[BrokerId(4)].state is BrokerStateName.ACTIVE


async def test_a_cleanly_stopped_broker_can_come_back_at_once(
    nodes: Callable[[int], Awaitable[ClusterNode]], metadata_url: str
) -> None:
    node = await nodes(6)
    await wait_until_async(lambda: node.is_controller, 5)
    await node.stop()
    again = ClusterNode(fast_settings(metadata_url), 6, "http://127.0.0.1:20006")
    began = time.monotonic()
    await again.start(register_wait_ms=0)
    try:
        assert time.monotonic() - began < 2
        assert again.broker_epoch == 2
        # The lease was resigned: the new incarnation becomes controller without waiting it out.
        await wait_until_async(lambda: again.is_controller, 1.5)
    finally:
        await again.stop()
