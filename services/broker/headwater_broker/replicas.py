"""Makes this broker's replicas and roles follow the metadata, one image at a time.

It subscribes to the metadata follower (``node.follower.add_listener``). Every batch of events
(a topic created or deleted, a partition's leader, ISR or replica list changed, a broker fenced
or unfenced, a fresh snapshot) wakes one task that brings the partition registry
(``partitions.py``) in line with the newest image, in one pass, in order:

1. replicas of topics the image no longer has (or has under a new topic id) are deleted;
2. every partition whose replica list names this broker gets a local replica
   (:meth:`PartitionRegistry.host`), config changes are taken;
3. a partition this broker leads in the image is taken over with :meth:`Replicas.become_leader`
   -- only while the image shows this broker ``active`` *in its own incarnation*
   (``image.is_active(me, node.broker_epoch)``): a restarted broker whose registration the
   controller has not recorded yet reads its previous incarnation's leaderships and must not act
   on them; every other replica is handed to :meth:`Replicas.become_follower`;
4. replicas the image moved to other brokers are deleted.

A pass reads one immutable image, so it never sees a half-applied change. Passes run one at a
time on the event loop; a burst of changes while one runs is folded into the next.

The roles themselves are replication's (``roles.py``): a leader stamps its epoch, answers
follower fetches, tracks the in-sync set and moves the high watermark; a follower is copied by
the fetcher of its leader broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from headwater.types import BrokerId
from headwater_broker import metrics, topic_config
from headwater_broker.cluster.image import MetadataEvent, MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import PartitionState
from headwater_broker.partitions import HostedPartition, PartitionRegistry
from headwater_broker.roles import Replication
from headwater_broker.settings import BrokerSettings
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker.replicas")


class Replicas:
    """Applies the metadata image to one broker's replicas (``start()``, ``stop()``)."""

    def __init__(
        self,
        settings: BrokerSettings,
        registry: PartitionRegistry,
        replication: Replication,
        node: ClusterNode,
        now_ms: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.registry = registry
        self.replication = replication
        self.node = node
        self.now_ms = now_ms
        self.applied = -1
        """The change offset of the last image applied (-1 before the first pass)."""
        self._wake = asyncio.Event()
        self._done = asyncio.Condition()
        self._tasks = BackgroundTasks(log)

    async def start(self) -> None:
        self.node.follower.add_listener(self._on_metadata)
        self._tasks.spawn(self._run(), "replica-applier")
        self._wake.set()
        await self.settle()

    @property
    def failed_tasks(self) -> dict[str, str]:
        return self._tasks.failed

    async def stop(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):
            self.node.follower.remove_listener(self._on_metadata)
        await self._tasks.stop()

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
        registry, me = self.registry, self.broker_id
        for name, local in list(registry.topics.items()):
            topic = image.topic(name)
            if topic is None or topic.topic_id != local.topic_id:
                await self.drop_topic(name)
        active = image.is_active(me, self.node.broker_epoch)
        for topic in image.topics.values():
            for state in image.partitions_of(topic.name):
                if me in state.replicas:
                    hosted = registry.host(topic, state.partition, self.now_ms())
                    if state.leader == me and active:
                        self.become_leader(state, hosted)
                    else:
                        self.become_follower(state, hosted)
                else:
                    hosted_here = registry.get(topic.name, state.partition)
                    if hosted_here is not None:
                        await self.drop(hosted_here)
            registry.set_configs(topic)
        self._update_metrics(image)

    async def drop_topic(self, name: str) -> None:
        """Delete this broker's replicas of a topic and their data."""
        local = self.registry.topics.get(name)
        if local is None:
            return
        for hosted in list(local.partitions.values()):
            await self.drop(hosted)
        metrics.forget_topic(name, 0)
        log.info("deleted the replicas of topic %s", name)

    async def drop(self, hosted: HostedPartition) -> None:
        """End a replica's role, take it out of the registry and delete its data."""
        if hosted.current_leader() is not None:
            hosted.log.wake_waiters()
        self.replication.drop(hosted)
        self.registry.remove(hosted.log.topic, hosted.log.partition)
        await self.registry.delete(hosted)

    def replication_settings(self, topic_name: str, replica_count: int) -> tuple[int, int]:
        """``min.insync.replicas`` and ``replica.lag.time.max.ms`` of a topic's partition.

        A topic without ``min.insync.replicas`` takes ``BROKER_MIN_INSYNC_REPLICAS``, at most
        the partition's replica count (so a one-replica topic still takes acks=all writes where
        the brokers default to 2); a topic's own setting is taken as it is.
        """
        topic = self.node.image.topic(topic_name)
        configs = {} if topic is None else topic.configs
        configured = configs.get(topic_config.MIN_INSYNC_REPLICAS)
        if configured is None:
            min_isr = max(1, min(self.settings.min_insync_replicas, replica_count))
        else:
            min_isr = int(configured)
        lag = int(
            configs.get(
                topic_config.REPLICA_LAG_TIME_MAX_MS, str(self.settings.replica_lag_time_max_ms)
            )
        )
        return min_isr, lag

    def become_leader(self, state: PartitionState, hosted: HostedPartition) -> None:
        """Serve the partition as its leader from ``state.leader_epoch`` on.

        The replication leader stamps the epoch into appended batches, records it in the
        leader-epoch checkpoint, answers follower fetches and takes ISR changes in this epoch.
        """
        before = hosted.current_leader()
        min_isr, lag = self.replication_settings(state.topic, len(state.replicas))
        self.replication.lead(
            hosted, state, min_insync_replicas=min_isr, replica_lag_time_max_ms=lag
        )
        if before is not None and before.leader_epoch == state.leader_epoch:
            return
        hosted.log.wake_waiters()
        log.info(
            "broker %d leads %s-%d at leader epoch %d",
            self.broker_id,
            state.topic,
            state.partition,
            state.leader_epoch,
        )

    def become_follower(self, state: PartitionState, hosted: HostedPartition) -> None:
        """Stop serving the partition as leader (if it did) and copy ``state.leader``'s log.

        The fetcher of that leader truncates by leader epoch and appends what it sends.
        """
        led = hosted.current_leader() is not None
        leader_url = None
        if state.leader != self.broker_id:
            leader_url = self.node.image.leader_url(state.topic, state.partition)
        self.replication.follow(hosted, state, leader_url)
        if led:
            hosted.log.wake_waiters()  # long-polling fetches find out at once
            log.info(
                "broker %d no longer leads %s-%d (leader now %d, epoch %d)",
                self.broker_id,
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
