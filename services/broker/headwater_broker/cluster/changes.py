"""The change log's entries: what one controller transaction writes, and how a row is decoded.

A change row is ``(offset, controller_epoch, kind, body)``; the body is the new full state of one
entity (:mod:`.state`), so applying a change twice is harmless and a reader never needs the rows
before it to understand it. Kinds::

    controller     ControllerInfo   an election (written by the winner, in the election itself)
    broker         BrokerState      a registration recorded, fenced, unfenced, shutting down
    topic          TopicState       created, configs altered, partitions added
    topic_deleted  TopicDeletion    the topic and all its partitions are gone
    partition      PartitionState   created, leader / ISR / replicas changed

A controller *write* is a list of :data:`Mutation`; the store turns each into its table rows and
one change row, in one transaction (``store.MetadataStore.write_changes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from headwater_broker.cluster.state import (
    BrokerState,
    ChangeOffset,
    ControllerEpoch,
    ControllerInfo,
    PartitionState,
    TopicState,
)


class ChangeKind(StrEnum):
    CONTROLLER = "controller"
    BROKER = "broker"
    TOPIC = "topic"
    TOPIC_DELETED = "topic_deleted"
    PARTITION = "partition"


@dataclass(frozen=True)
class TopicDeletion:
    name: str
    topic_id: str

    def to_body(self) -> dict[str, Any]:
        return {"name": self.name, "topic_id": self.topic_id}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TopicDeletion:
        return cls(str(body["name"]), str(body["topic_id"]))


Record = ControllerInfo | BrokerState | TopicState | TopicDeletion | PartitionState


@dataclass(frozen=True)
class PartitionWrite:
    """A partition's new state, written only if the row still holds ``before``'s epochs.

    ``before`` None creates the partition. The compare-and-set on the leader and partition
    epochs is what makes an in-sync proposal made against an older state fail
    (``StalePartitionEpochError``) even if the controller's image were wrong.
    """

    after: PartitionState
    before: PartitionState | None


Mutation = BrokerState | TopicState | TopicDeletion | PartitionWrite
"""What a controller transaction writes: each becomes its table rows plus one change."""


def record_of(mutation: Mutation) -> Record:
    return mutation.after if isinstance(mutation, PartitionWrite) else mutation


def kind_of(record: Record) -> ChangeKind:
    if isinstance(record, ControllerInfo):
        return ChangeKind.CONTROLLER
    if isinstance(record, BrokerState):
        return ChangeKind.BROKER
    if isinstance(record, TopicState):
        return ChangeKind.TOPIC
    if isinstance(record, TopicDeletion):
        return ChangeKind.TOPIC_DELETED
    return ChangeKind.PARTITION


def decode_record(kind: str, body: dict[str, Any]) -> Record:
    match ChangeKind(kind):
        case ChangeKind.CONTROLLER:
            return ControllerInfo.from_body(body)
        case ChangeKind.BROKER:
            return BrokerState.from_body(body)
        case ChangeKind.TOPIC:
            return TopicState.from_body(body)
        case ChangeKind.TOPIC_DELETED:
            return TopicDeletion.from_body(body)
        case ChangeKind.PARTITION:
            return PartitionState.from_body(body)


@dataclass(frozen=True)
class Change:
    """One row of the change log."""

    offset: ChangeOffset
    controller_epoch: ControllerEpoch
    record: Record

    @property
    def kind(self) -> ChangeKind:
        return kind_of(self.record)
