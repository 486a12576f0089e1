"""Builders of metadata states for the cluster's unit tests."""

from __future__ import annotations

from collections.abc import Sequence

from headwater.types import BrokerId, PartitionId
from headwater_broker.cluster.state import (
    BrokerEpoch,
    BrokerState,
    BrokerStateName,
    ChangeOffset,
    LeaderEpoch,
    PartitionEpoch,
    PartitionState,
)


def broker(
    broker_id: int,
    state: BrokerStateName = BrokerStateName.ACTIVE,
    epoch: int = 1,
    fenced_change: int = 1,
    rack: str | None = None,
) -> BrokerState:
    return BrokerState(
        broker_id=BrokerId(broker_id),
        epoch=BrokerEpoch(epoch),
        incarnation=f"inc-{broker_id}-{epoch}",
        url=f"http://127.0.0.1:{9000 + broker_id}",
        rack=rack,
        state=state,
        fenced_change=ChangeOffset(fenced_change),
    )


def brokers(
    active: Sequence[int], fenced: Sequence[int] = (), shutting_down: Sequence[int] = ()
) -> dict[BrokerId, BrokerState]:
    out = {BrokerId(b): broker(b) for b in active}
    out.update({BrokerId(b): broker(b, BrokerStateName.FENCED) for b in fenced})
    out.update({BrokerId(b): broker(b, BrokerStateName.SHUTTING_DOWN) for b in shutting_down})
    return out


def partition(
    replicas: Sequence[int],
    isr: Sequence[int] | None = None,
    leader: int | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    adding: Sequence[int] = (),
    removing: Sequence[int] = (),
    topic: str = "t",
    number: int = 0,
) -> PartitionState:
    ids = tuple(BrokerId(b) for b in replicas)
    return PartitionState(
        topic=topic,
        topic_id=f"id-{topic}",
        partition=PartitionId(number),
        replicas=ids,
        isr=ids if isr is None else tuple(BrokerId(b) for b in isr),
        leader=BrokerId(ids[0] if leader is None else leader),
        leader_epoch=LeaderEpoch(leader_epoch),
        partition_epoch=PartitionEpoch(partition_epoch),
        adding=tuple(BrokerId(b) for b in adding),
        removing=tuple(BrokerId(b) for b in removing),
    )
