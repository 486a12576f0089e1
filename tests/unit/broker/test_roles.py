"""Replication's roles in the partition registry, from partition states, and their metrics."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from headwater.records.batch import iter_batches
from headwater.types import BrokerId, PartitionId
from headwater_broker.cluster.election import IsrProposal
from headwater_broker.cluster.state import LeaderEpoch, PartitionEpoch, PartitionState, TopicState
from headwater_broker.partitions import PartitionRegistry
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.roles import Replication
from tests.support import unique
from tests.unit.broker.replication_sim import NOW, values_batch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_roles_and_metrics(tmp_path: Path) -> None:
    topic = unique("m")
    committed: list[IsrProposal] = []

    async def send_isr(proposal: IsrProposal) -> PartitionState:
        committed.append(proposal)
        raise AssertionError("not reached in this test")

    registry = PartitionRegistry(tmp_path, "never", ProducerRegistry(60_000))
    replication = Replication(
        registry,
        broker_id=0,
        broker_epoch=lambda: 1,
        now_ms=lambda: NOW,
        send_isr=send_isr,
        is_active=lambda _b: True,
    )
    hosted = registry.host(TopicState(topic, "id", 1, {}), 0, NOW)
    state = PartitionState(
        topic,
        "id",
        PartitionId(0),
        (BrokerId(0), BrokerId(1), BrokerId(2)),
        (BrokerId(0), BrokerId(1), BrokerId(2)),
        BrokerId(0),
        LeaderEpoch(3),
        PartitionEpoch(7),
    )
    try:
        leader = replication.lead(
            hosted, state, min_insync_replicas=2, replica_lag_time_max_ms=1000
        )
        assert registry.leader(topic, 0) is leader
        assert registry.leads(topic, 0, LeaderEpoch(3))
        body = bytearray(values_batch(["a", "b", "c"]))
        await leader.append(body, list(iter_batches(body)), NOW, acks=1, timeout_s=1)
        replication._update_metrics()
        assert sample("headwater_broker_follower_lag_records", topic=topic, partition="0") == 3
        assert sample("headwater_broker_under_replicated_partitions") == 0
        # The ISR shrinks within the same leader epoch: the same leader object takes it.
        shrunk = replace(state, isr=(BrokerId(0),), partition_epoch=PartitionEpoch(8))
        assert (
            replication.lead(hosted, shrunk, min_insync_replicas=2, replica_lag_time_max_ms=1000)
            is leader
        )
        assert leader.isr == (0,)
        replication._update_metrics()
        assert sample("headwater_broker_under_replicated_partitions") == 1
        assert sample("headwater_broker_under_min_isr_partitions") == 1
        # Following another leader (unknown URL: nothing fetched) retires the leader.
        follower_state = replace(shrunk, leader=BrokerId(2), leader_epoch=LeaderEpoch(4))
        replication.follow(hosted, follower_state, None)
        assert leader.resigned
        assert registry.leader(topic, 0) is None
        assert registry.leading() == {}
        replication._update_metrics()
        assert sample("headwater_broker_follower_lag_records", topic=topic, partition="0") is None
        assert sample("headwater_broker_under_replicated_partitions") == 0
    finally:
        await replication.close()
    assert not committed
