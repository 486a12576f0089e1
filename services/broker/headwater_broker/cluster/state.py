"""The metadata entities (controller, broker, topic, partition), their epochs and JSON bodies.

Each entity is immutable; a change to one is a new value. The JSON body of an entity is exactly
what the change log stores for it (``changes.body``), so the snapshot tables and the log agree by
construction: ``to_body``/``from_body`` are the only codec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NewType

from headwater.topic_partition import TopicPartition
from headwater.types import BrokerId, PartitionId

ControllerEpoch = NewType("ControllerEpoch", int)
"""Grows by one at each controller election; 0 before the first."""
BrokerEpoch = NewType("BrokerEpoch", int)
"""Grows by one at each registration of a broker id (a new process incarnation)."""
LeaderEpoch = NewType("LeaderEpoch", int)
"""Grows by one at each leader change of a partition."""
PartitionEpoch = NewType("PartitionEpoch", int)
"""Grows by one at each leader, in-sync set or replica list change of a partition."""
ChangeOffset = NewType("ChangeOffset", int)
"""Position in the change log: gapless from 1; 0 = before any change."""

NO_LEADER = BrokerId(-1)
NO_CONTROLLER = BrokerId(-1)


class BrokerStateName(StrEnum):
    """A broker's state as the controller recorded it; only ``active`` brokers lead or join ISRs."""

    FENCED = "fenced"
    ACTIVE = "active"
    SHUTTING_DOWN = "shutting_down"


@dataclass(frozen=True)
class ControllerInfo:
    broker_id: BrokerId
    epoch: ControllerEpoch

    def to_body(self) -> dict[str, Any]:
        return {"broker_id": self.broker_id, "epoch": self.epoch}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ControllerInfo:
        return cls(BrokerId(int(body["broker_id"])), ControllerEpoch(int(body["epoch"])))


@dataclass(frozen=True)
class BrokerState:
    """A broker registration as the controller recorded it (the ``brokers`` table).

    ``fenced_change`` is the change that last fenced this broker (its registration, or its
    fencing for missed heartbeats): it is unfenced once it has applied that change.
    """

    broker_id: BrokerId
    epoch: BrokerEpoch
    incarnation: str
    url: str
    rack: str | None
    state: BrokerStateName
    fenced_change: ChangeOffset

    @property
    def active(self) -> bool:
        return self.state is BrokerStateName.ACTIVE

    def to_body(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "epoch": self.epoch,
            "incarnation": self.incarnation,
            "url": self.url,
            "rack": self.rack,
            "state": self.state.value,
            "fenced_change": self.fenced_change,
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> BrokerState:
        return cls(
            broker_id=BrokerId(int(body["broker_id"])),
            epoch=BrokerEpoch(int(body["epoch"])),
            incarnation=str(body["incarnation"]),
            url=str(body["url"]),
            rack=None if body.get("rack") is None else str(body["rack"]),
            state=BrokerStateName(body["state"]),
            fenced_change=ChangeOffset(int(body["fenced_change"])),
        )


@dataclass(frozen=True)
class TopicState:
    """A topic: its id (a new one if the name is deleted and created again) and config overrides."""

    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def to_body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": self.topic_id,
            "partitions": self.partitions,
            "configs": dict(sorted(self.configs.items())),
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TopicState:
        configs = {str(k): str(v) for k, v in dict(body.get("configs") or {}).items()}
        return cls(str(body["name"]), str(body["topic_id"]), int(body["partitions"]), configs)


def _ids(values: Any) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(int(v)) for v in values or ())


@dataclass(frozen=True)
class PartitionState:
    """One partition's replica list, in-sync set, leader and epochs.

    ``replicas`` is in preferred order (the first is the preferred leader). During a reassignment
    it holds the target replicas followed by the ``removing`` ones, and ``adding`` names the
    targets that are new. ``unclean`` is true when the current leader was elected from outside
    the in-sync set (it stays true until the next leader change).
    """

    topic: str
    topic_id: str
    partition: PartitionId
    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    leader: BrokerId
    leader_epoch: LeaderEpoch
    partition_epoch: PartitionEpoch
    adding: tuple[BrokerId, ...] = ()
    removing: tuple[BrokerId, ...] = ()
    unclean: bool = False

    @property
    def key(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[BrokerId, ...]:
        """The replica list once a reassignment in progress completes (``replicas`` otherwise)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def to_body(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "topic_id": self.topic_id,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "adding": list(self.adding),
            "removing": list(self.removing),
            "unclean": self.unclean,
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> PartitionState:
        return cls(
            topic=str(body["topic"]),
            topic_id=str(body["topic_id"]),
            partition=PartitionId(int(body["partition"])),
            replicas=_ids(body["replicas"]),
            isr=_ids(body["isr"]),
            leader=BrokerId(int(body["leader"])),
            leader_epoch=LeaderEpoch(int(body["leader_epoch"])),
            partition_epoch=PartitionEpoch(int(body["partition_epoch"])),
            adding=_ids(body.get("adding")),
            removing=_ids(body.get("removing")),
            unclean=bool(body.get("unclean", False)),
        )
