"""The metadata image: an immutable in-memory view of the cluster at one change offset.

An image is loaded from a snapshot (``store.MetadataStore.read_snapshot``) and advanced by
:meth:`MetadataImage.apply`, a pure function of the image and the next change rows that returns
the new image and the events describing what changed. Images are never mutated, so a reader that
holds one across an ``await`` sees one consistent state; the metadata follower
(``metadata_follower.py``) swaps the current image and tells its listeners.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from headwater.types import BrokerId, PartitionId
from headwater_broker.cluster.changes import Change, TopicDeletion
from headwater_broker.cluster.state import (
    NO_CONTROLLER,
    BrokerEpoch,
    BrokerState,
    ChangeOffset,
    ControllerEpoch,
    ControllerInfo,
    PartitionState,
    TopicState,
)

# --- Events: what one batch of changes did, in change order ---------------------------------------


@dataclass(frozen=True)
class ControllerChanged:
    before: ControllerInfo
    after: ControllerInfo


@dataclass(frozen=True)
class BrokerChanged:
    """A broker was registered (``before`` None), or its epoch, URL or state changed."""

    before: BrokerState | None
    after: BrokerState


@dataclass(frozen=True)
class TopicChanged:
    """A topic was created (``before`` None), or its configs or partition count changed."""

    before: TopicState | None
    after: TopicState


@dataclass(frozen=True)
class TopicDeleted:
    topic: TopicState
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True)
class PartitionChanged:
    """A partition was created (``before`` None) or its leader, ISR or replicas changed."""

    before: PartitionState | None
    after: PartitionState

    @property
    def leader_changed(self) -> bool:
        return self.before is None or self.before.leader_epoch != self.after.leader_epoch

    @property
    def isr_changed(self) -> bool:
        return self.before is None or self.before.isr != self.after.isr

    @property
    def replicas_changed(self) -> bool:
        before = self.before
        return (
            before is None
            or before.replicas != self.after.replicas
            or before.adding != self.after.adding
            or before.removing != self.after.removing
        )


@dataclass(frozen=True)
class ImageReloaded:
    """The image was replaced by a fresh snapshot (start, or the follower's offset was pruned).

    Listeners must resynchronise from the new image: changes in between were not seen one by one.
    """

    before_offset: ChangeOffset


MetadataEvent = (
    ControllerChanged
    | BrokerChanged
    | TopicChanged
    | TopicDeleted
    | PartitionChanged
    | ImageReloaded
)


class ChangeGapError(Exception):
    """The changes given do not follow the image's offset (rows in between were not read)."""


# --- The image ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataImage:
    """The cluster's metadata as of change ``offset``; every broker converges on the same one."""

    offset: ChangeOffset
    cluster_id: str
    controller: ControllerInfo
    brokers: Mapping[BrokerId, BrokerState] = field(default_factory=dict)
    topics: Mapping[str, TopicState] = field(default_factory=dict)
    partitions: Mapping[str, Mapping[PartitionId, PartitionState]] = field(default_factory=dict)

    @classmethod
    def empty(cls, cluster_id: str) -> MetadataImage:
        return cls(ChangeOffset(0), cluster_id, ControllerInfo(NO_CONTROLLER, ControllerEpoch(0)))

    # --- reading --------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerState | None:
        return self.brokers.get(BrokerId(broker_id))

    def active_brokers(self) -> list[BrokerState]:
        return sorted((b for b in self.brokers.values() if b.active), key=lambda b: b.broker_id)

    def is_active(self, broker_id: int, epoch: BrokerEpoch | None = None) -> bool:
        """True if the broker is active (in this incarnation, when ``epoch`` is given)."""
        broker = self.brokers.get(BrokerId(broker_id))
        return broker is not None and broker.active and (epoch is None or broker.epoch == epoch)

    def topic(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get(topic, {}).get(PartitionId(partition))

    def partitions_of(self, topic: str) -> list[PartitionState]:
        return [p for _, p in sorted(self.partitions.get(topic, {}).items())]

    def all_partitions(self) -> Iterator[PartitionState]:
        for by_id in self.partitions.values():
            yield from by_id.values()

    def led_by(self, broker_id: int) -> list[PartitionState]:
        return [p for p in self.all_partitions() if p.leader == broker_id]

    def leader_url(self, topic: str, partition: int) -> str | None:
        state = self.partition(topic, partition)
        if state is None:
            return None
        leader = self.brokers.get(state.leader)
        return None if leader is None else leader.url

    def controller_url(self) -> str | None:
        broker = self.brokers.get(self.controller.broker_id)
        return None if broker is None else broker.url

    # --- advancing ------------------------------------------------------------------------------

    def apply(self, changes: Sequence[Change]) -> tuple[MetadataImage, list[MetadataEvent]]:
        """The image after ``changes`` (in offset order), and what they did.

        Changes at or below ``offset`` are skipped (already applied); the first new one must be
        ``offset + 1``, else :class:`ChangeGapError` (the caller reloads a snapshot).
        """
        fresh = [c for c in changes if c.offset > self.offset]
        if not fresh:
            return self, []
        builder = _Builder(self)
        events: list[MetadataEvent] = []
        expected = self.offset + 1
        for change in fresh:
            if change.offset != expected:
                raise ChangeGapError(
                    f"change {change.offset} follows {expected - 1}: changes in between missing"
                )
            expected += 1
            event = builder.apply(change)
            if event is not None:
                events.append(event)
        return builder.build(ChangeOffset(expected - 1)), events


class _Builder:
    """Copy-on-write over an image: each collection (and each topic's partitions) copied once."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.controller = image.controller
        self.brokers: Mapping[BrokerId, BrokerState] = image.brokers
        self.topics: Mapping[str, TopicState] = image.topics
        self.partitions: Mapping[str, Mapping[PartitionId, PartitionState]] = image.partitions
        self._brokers: dict[BrokerId, BrokerState] | None = None
        self._topics: dict[str, TopicState] | None = None
        self._partitions: dict[str, Mapping[PartitionId, PartitionState]] | None = None
        self._copied_topics: dict[str, dict[PartitionId, PartitionState]] = {}

    def _broker_map(self) -> dict[BrokerId, BrokerState]:
        if self._brokers is None:
            self._brokers = dict(self.brokers)
            self.brokers = self._brokers
        return self._brokers

    def _topic_map(self) -> dict[str, TopicState]:
        if self._topics is None:
            self._topics = dict(self.topics)
            self.topics = self._topics
        return self._topics

    def _partition_map(self) -> dict[str, Mapping[PartitionId, PartitionState]]:
        if self._partitions is None:
            self._partitions = dict(self.partitions)
            self.partitions = self._partitions
        return self._partitions

    def _topic_partitions(self, topic: str) -> dict[PartitionId, PartitionState]:
        copied = self._copied_topics.get(topic)
        if copied is None:
            outer = self._partition_map()
            copied = dict(outer.get(topic, {}))
            outer[topic] = copied
            self._copied_topics[topic] = copied
        return copied

    def apply(self, change: Change) -> MetadataEvent | None:
        record = change.record
        if isinstance(record, ControllerInfo):
            before_controller = self.controller
            self.controller = record
            return ControllerChanged(before_controller, record)
        if isinstance(record, BrokerState):
            before_broker = self.brokers.get(record.broker_id)
            self._broker_map()[record.broker_id] = record
            return BrokerChanged(before_broker, record)
        if isinstance(record, TopicState):
            before_topic = self.topics.get(record.name)
            self._topic_map()[record.name] = record
            return TopicChanged(before_topic, record)
        if isinstance(record, TopicDeletion):
            topic = self.topics.get(record.name)
            if topic is None or topic.topic_id != record.topic_id:
                return None
            del self._topic_map()[record.name]
            gone = tuple(p for _, p in sorted(self.partitions.get(record.name, {}).items()))
            self._partition_map().pop(record.name, None)
            self._copied_topics.pop(record.name, None)
            return TopicDeleted(topic, gone)
        before_partition = self.partitions.get(record.topic, {}).get(record.partition)
        self._topic_partitions(record.topic)[record.partition] = record
        return PartitionChanged(before_partition, record)

    def build(self, offset: ChangeOffset) -> MetadataImage:
        return MetadataImage(
            offset=offset,
            cluster_id=self.image.cluster_id,
            controller=self.controller,
            brokers=self.brokers,
            topics=self.topics,
            partitions=self.partitions,
        )
