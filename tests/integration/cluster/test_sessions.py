"""Broker sessions and producer ids on SQLite and PostgreSQL: registration and its refusal,
heartbeats of a replaced incarnation, release, cluster-wide producer ids and epochs."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from headwater.errors import (
    BrokerIdInUseError,
    InvalidProducerEpochError,
    StaleBrokerEpochError,
    UnknownProducerIdError,
)
from headwater_broker.cluster import producer_ids, session
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.producer_ids import ProducerIds
from headwater_broker.cluster.store import MetadataStore
from tests.integration.cluster.conftest import Cluster

pytestmark = pytest.mark.anyio

# Long enough that a loaded machine registers twice within one session; short enough to wait out.
TIMEOUT = 1500


def test_a_second_live_broker_with_the_same_id_is_refused_naming_the_first(
    cluster: Cluster,
) -> None:
    first, second = cluster.store(), cluster.store()
    live = session.register(first, 3, "http://first:1", None, TIMEOUT)
    assert live.epoch == 1
    with pytest.raises(BrokerIdInUseError) as refused:
        session.register(second, 3, "http://second:2", None, TIMEOUT)
    message = refused.value.message
    assert message.startswith(
        f"Broker id 3 is in use by a live broker at http://first:1 (incarnation "
        f"{live.incarnation}, epoch 1, last heartbeat "
    )
    assert refused.value.error_code == 40908
    # The first keeps its session: its heartbeats still match.
    session.heartbeat(first, live, 0)
    _, rows = session.read_sessions(first)
    assert [(r.broker_id, r.incarnation, r.url) for r in rows] == [
        (3, live.incarnation, "http://first:1")
    ]


def test_a_dead_brokers_id_is_free_once_its_session_expired(cluster: Cluster) -> None:
    store = cluster.store()
    dead = session.register(store, 0, "http://a:1", None, TIMEOUT)
    time.sleep(TIMEOUT / 1000 + 0.1)
    again = session.register(store, 0, "http://a:2", "rack-b", TIMEOUT)
    assert again.epoch == dead.epoch + 1
    assert again.incarnation != dead.incarnation
    with pytest.raises(StaleBrokerEpochError) as replaced:
        session.heartbeat(store, dead, 5)
    assert replaced.value.message == (
        f"Broker 0 incarnation {dead.incarnation} epoch 1 was replaced: the id is now held by "
        f"incarnation {again.incarnation} epoch 2 at http://a:2"
    )


def test_a_released_session_lets_the_id_register_again_at_once(cluster: Cluster) -> None:
    store = cluster.store()
    first = session.register(store, 1, "http://a:1", None, TIMEOUT)
    assert session.release(store, first)
    second = session.register(store, 1, "http://a:1", None, TIMEOUT)
    assert second.epoch == 2
    assert not session.release(store, first)  # the old incarnation can no longer touch the row


async def test_registration_waits_out_a_dead_predecessor_but_not_a_live_one(
    cluster: Cluster,
) -> None:
    store = cluster.store()
    session.register(store, 2, "http://old:1", None, TIMEOUT)  # then "killed": no heartbeats
    started = time.monotonic()
    taken = await session.register_waiting(store, 2, "http://new:1", None, TIMEOUT, 2 * TIMEOUT)
    waited = time.monotonic() - started
    assert taken.epoch == 2
    assert TIMEOUT / 1000 * 0.5 < waited < 2 * TIMEOUT / 1000 + 0.5

    # A live holder keeps heartbeating through the whole wait: still refused.
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            session.heartbeat(store, taken, 0)
            time.sleep(0.05)

    beater = threading.Thread(target=beat)
    beater.start()
    try:
        with pytest.raises(BrokerIdInUseError, match="http://new:1"):
            await session.register_waiting(store, 2, "http://third:1", None, TIMEOUT, 2 * TIMEOUT)
    finally:
        stop.set()
        beater.join()


async def test_producer_ids_are_unique_across_brokers(cluster: Cluster) -> None:
    brokers = [ProducerIds(cluster.store(), block_size=7) for _ in range(3)]
    issued: list[int] = []
    for _ in range(20):
        for ids in brokers:
            producer_id, epoch = await ids.init_producer(None, None)
            assert epoch == 0
            issued.append(producer_id)
    assert len(set(issued)) == len(issued) == 60
    # Blocks of 7, one at a time per broker: 3 brokers x 3 blocks reserved, 63 ids.
    assert max(issued) < 63


def test_concurrent_block_allocation_never_hands_out_an_id_twice(cluster: Cluster) -> None:
    stores = [cluster.store() for _ in range(4)]
    blocks: list[range] = []
    lock = threading.Lock()

    def take(store: MetadataStore) -> None:
        for _ in range(10):
            block = producer_ids.allocate_block(store, 5)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=take, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [i for block in blocks for i in block]
    assert sorted(ids) == list(range(200))


async def test_a_producer_epoch_bump_fences_every_older_instance(cluster: Cluster) -> None:
    a, b = ProducerIds(cluster.store(), 10), ProducerIds(cluster.store(), 10)
    producer_id, epoch = await a.init_producer(None, None)
    # Two instances race to take the id over from epoch 0: one wins.
    assert await b.init_producer(producer_id, epoch) == (producer_id, 1)
    with pytest.raises(InvalidProducerEpochError, match="epoch 0 is not the current epoch 1"):
        await a.init_producer(producer_id, epoch)
    assert await a.store.call(producer_ids.current_epoch, a.store, producer_id) == 1
    with pytest.raises(UnknownProducerIdError):
        await a.init_producer(10_000, 0)
    # Unused ids expire; their epochs are then unknown.
    time.sleep(0.05)
    assert await a.store.call(producer_ids.expire, a.store, 10) == 1
    with pytest.raises(UnknownProducerIdError):
        await b.init_producer(producer_id, 1)


async def test_an_exhausted_producer_epoch_gets_a_fresh_id(cluster: Cluster) -> None:
    ids = ProducerIds(cluster.store(), 10)
    producer_id, _ = await ids.init_producer(None, None)
    with ids.store.write() as conn:
        conn.execute(sa.update(t.producers).values(epoch=producer_ids.MAX_EPOCH))
    fresh, epoch = await ids.init_producer(producer_id, producer_ids.MAX_EPOCH)
    assert fresh != producer_id
    assert epoch == 0
    assert await ids.store.call(producer_ids.current_epoch, ids.store, producer_id) is None
