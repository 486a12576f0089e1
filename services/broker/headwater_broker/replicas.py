"""The replica manager: makes this broker's replicas and leaderships follow the metadata.

It subscribes to the metadata follower (``node.follower.add_listener``). Every batch of events
(a topic created or deleted, a partition's leader, ISR or replica list changed, a broker fenced
or unfenced, a fresh snapshot) wakes one task that brings the broker in line with the newest
image, in one pass, in order:

1. replicas of topics the image no longer has (or has under a new topic id) are deleted;
2. every partition whose replica list names this broker gets a local replica
   (:meth:`Host.host`), config changes are taken;
3. a partition this broker leads in the image is taken over with :meth:`become_leader` --
   only while the image shows this broker ``active`` *in its own incarnation*
   (``image.is_active(me, node.broker_epoch)``): a restarted broker whose registration the
   controller has not recorded yet reads its previous incarnation's leaderships and must not act
   on them; every other replica is handed to :meth:`become_follower`;
4. replicas the image moved to other brokers are deleted.

A pass reads one immutable image, so it never sees a half-applied change. Passes run one at a
time on the event loop; a burst of changes while one runs is folded into the next.

``become_leader`` and ``become_follower`` hand the partition to the broker's replication
(``headwater_broker.replication.manager``): a leader stamps its epoch, answers follower fetches,
tracks the in-sync set and moves the high watermark; a follower is copied by the fetcher of its
leader broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from headwater.topic_partition import TopicPartition
from headwater.types import BrokerId
from headwater_broker import metrics
from headwater_broker.cluster.image import MetadataEvent, MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import LeaderEpoch, PartitionState, TopicState
from headwater_broker.log.partition import PartitionLog
from headwater_broker.replication.manager import Replication
from headwater_kernel.tasks import cancel_and_wait

log = logging.getLogger("headwater.broker.replicas")


class HostedTopic(Protocol):
    """One topic's replicas on this broker, as the host keeps them."""

    @property
    def topic_id(self) -> str: ...
    @property
    def logs(self) -> Mapping[int, PartitionLog]: ...


class Host(Protocol):
    """What the replica manager drives: the broker's replicas and the leaderships it serves."""

    @property
    def broker_id(self) -> BrokerId: ...
    @property
    def topics(self) -> Mapping[str, HostedTopic]: ...
    @property
    def replication(self) -> Replication | None: ...

    leading: dict[TopicPartition, LeaderEpoch]

    def host(self, topic: TopicState, partition: int) -> PartitionLog: ...
    def set_configs(self, topic: TopicState) -> None: ...
    def replication_settings(self, topic_name: str, replica_count: int) -> tuple[int, int]: ...
    async def drop_topic(self, name: str) -> None: ...
    async def drop_partition(self, name: str, partition: int) -> None: ...


class ReplicaManager:
    """Applies the metadata image to one broker's replicas (``start()``, ``stop()``)."""

    def __init__(self, broker: Host, node: ClusterNode) -> None:
        self.broker = broker
        self.node = node
        self.applied = -1
        """The change offset of the last image applied (-1 before the first pass)."""
        self._wake = asyncio.Event()
        self._done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.node.follower.add_listener(self._on_metadata)
        self._task = asyncio.create_task(self._run(), name="replica-manager")
        self._wake.set()
        await self.settle()

    async def stop(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):
            self.node.follower.remove_listener(self._on_metadata)
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _on_metadata(self, image: MetadataImage, events: Sequence[MetadataEvent]) -> None:
        # Runs inside the follower's swap: it must not block, so it only wakes the pass.
        self._wake.set()

    async def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until a pass has applied the image current now (bounded; a pass is quick)."""
        target = self.node.image.offset
        self._wake.set()
        async with self._done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._done.wait_for(lambda: self.applied >= target), timeout_s
                )

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            image = self.node.image
            try:
                await self.apply(image)
            except Exception:
                log.exception("applying metadata change %d failed; retrying", image.offset)
                await asyncio.sleep(0.5)
                self._wake.set()
                continue
            async with self._done:
                self.applied = image.offset
                self._done.notify_all()

    async def apply(self, image: MetadataImage) -> None:
        """One pass: the broker's replicas and leaderships as ``image`` says."""
        broker, me = self.broker, self.broker.broker_id
        for name, local in list(broker.topics.items()):
            topic = image.topic(name)
            if topic is None or topic.topic_id != local.topic_id:
                await broker.drop_topic(name)
        active = image.is_active(me, self.node.broker_epoch)
        for topic in image.topics.values():
            for state in image.partitions_of(topic.name):
                if me in state.replicas:
                    plog = broker.host(topic, state.partition)
                    if state.leader == me and active:
                        self.become_leader(state, plog)
                    else:
                        self.become_follower(state, plog)
                elif state.partition in _logs_of(broker.topics.get(topic.name)):
                    self.become_follower(state, None)
                    await broker.drop_partition(topic.name, state.partition)
            broker.set_configs(topic)
        self._update_metrics(image)

    def become_leader(self, state: PartitionState, plog: PartitionLog) -> None:
        """Serve the partition as its leader from ``state.leader_epoch`` on.

        The replication leader stamps the epoch into appended batches, records it in the
        leader-epoch checkpoint, answers follower fetches and takes ISR changes in this epoch.
        """
        key = state.key
        replication = self.broker.replication
        if replication is not None:
            min_isr, lag = self.broker.replication_settings(state.topic, len(state.replicas))
            replication.lead(plog, state, min_insync_replicas=min_isr, replica_lag_time_max_ms=lag)
        if self.broker.leading.get(key) == state.leader_epoch:
            return
        self.broker.leading[key] = state.leader_epoch
        plog.wake_waiters()
        log.info(
            "broker %d leads %s-%d at leader epoch %d",
            self.broker.broker_id,
            state.topic,
            state.partition,
            state.leader_epoch,
        )

    def become_follower(self, state: PartitionState, plog: PartitionLog | None) -> None:
        """Stop serving the partition as leader (if it did) and copy ``state.leader``'s log.

        The fetcher of that leader truncates by leader epoch and appends what it sends;
        ``plog`` None (the replica is being deleted) stops replicating it.
        """
        replication = self.broker.replication
        if replication is not None:
            if plog is None:
                replication.drop(state.topic, state.partition)
            else:
                leader_url = None
                if state.leader != self.broker.broker_id:
                    leader_url = self.node.image.leader_url(state.topic, state.partition)
                replication.follow(plog, state, leader_url)
        if self.broker.leading.pop(state.key, None) is not None:
            if plog is not None:
                plog.wake_waiters()  # long-polling fetches find out at once
            log.info(
                "broker %d no longer leads %s-%d (leader now %d, epoch %d)",
                self.broker.broker_id,
                state.topic,
                state.partition,
                state.leader,
                state.leader_epoch,
            )

    def _update_metrics(self, image: MetadataImage) -> None:
        metrics.ACTIVE_CONTROLLER.set(1 if self.node.is_controller else 0)
        metrics.CONTROLLER_EPOCH.set(image.controller.epoch)
        metrics.FENCED_BROKERS.set(sum(1 for b in image.brokers.values() if not b.active))
        metrics.OFFLINE_PARTITIONS.set(sum(1 for p in image.all_partitions() if p.leader < 0))


def _logs_of(topic: HostedTopic | None) -> Mapping[int, PartitionLog]:
    return {} if topic is None else topic.logs
