"""The replica manager: makes this broker's replicas and leaderships follow the metadata.

It subscribes to the metadata follower (``node.follower.add_listener``). Every batch of events
(a topic created or deleted, a partition's leader, ISR or replica list changed, a broker fenced
or unfenced, a fresh snapshot) wakes one task that brings the broker in line with the newest
image, in one pass, in order:

1. replicas of topics the image no longer has (or has under a new topic id) are deleted;
2. every partition whose replica list names this broker gets a local replica
   (:meth:`Broker.host`), config changes are taken;
3. a partition this broker leads in the image is taken over with :meth:`become_leader` --
   only while the image shows this broker ``active`` *in its own incarnation*
   (``image.is_active(me, node.broker_epoch)``): a restarted broker whose registration the
   controller has not recorded yet reads its previous incarnation's leaderships and must not act
   on them; every other replica is handed to :meth:`become_follower`;
4. replicas the image moved to other brokers are deleted.

A pass reads one immutable image, so it never sees a half-applied change. Passes run one at a
time on the event loop; a burst of changes while one runs is folded into the next.

``become_leader`` and ``become_follower`` are the seams replication fills: today a leader only
starts serving the fast paths, and a follower copies no data yet (it holds the replica
directory and stops serving).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from headwater_broker import metrics
from headwater_broker.cluster.image import MetadataEvent, MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import PartitionState
from headwater_broker.log.partition import PartitionLog

if TYPE_CHECKING:
    from headwater_broker.broker import Broker

log = logging.getLogger("headwater.broker.replicas")


class ReplicaManager:
    """Applies the metadata image to one broker's replicas (``start()``, ``stop()``)."""

    def __init__(self, broker: Broker, node: ClusterNode) -> None:
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
            task.cancel()
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
                elif state.partition in getattr(broker.topics.get(topic.name), "logs", {}):
                    self.become_follower(state, None)
                    await broker.drop_partition(topic.name, state.partition)
            broker.set_configs(topic)
        self._update_metrics(image)

    def become_leader(self, state: PartitionState, plog: PartitionLog) -> None:
        """Serve the partition as its leader from ``state.leader_epoch`` on.

        Replication fills this seam: stamp the leader epoch into appended batches, record it in
        the leader-epoch checkpoint, start answering follower fetches.
        """
        key = state.key
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
        """Stop serving the partition as leader (if it did).

        Replication fills this seam: truncate by leader epoch, fetch from ``state.leader``.
        """
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
