"""Topic admin: create, describe, alter, grow, reassign and delete topics, through the controller.

The controller (``cluster/controller.py``) carries every change out as one fenced transaction;
this broker must be the active controller to ask it (:meth:`TopicAdmin.controller_url` says
where it is otherwise: the routes relay there, ``api/forward.py``). After a write the answer
waits until this broker's replicas reflect it, so a create reads back at once. Descriptions come
from the metadata image, their offsets from each partition's leader (-1 while unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from headwater.errors import InvalidConfigError, NotControllerError, TopicAlreadyExistsError
from headwater.types import BrokerId, Offset, PartitionId
from headwater_broker.cluster.controller import Controller
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import LeaderEpoch, PartitionState
from headwater_broker.peers import Peers
from headwater_broker.routing import Routing
from headwater_broker.settings import BrokerSettings
from headwater_broker.topic_config import effective_configs, validate_topic_name


@dataclass(frozen=True)
class ReplicaInfo:
    broker: BrokerId
    leader: bool
    in_sync: bool


@dataclass
class PartitionInfo:
    """A partition as the metadata describes it; offsets from its leader (-1 when unreachable)."""

    partition: PartitionId
    leader: BrokerId
    leader_epoch: LeaderEpoch
    replicas: list[ReplicaInfo]
    isr: list[BrokerId]
    beginning_offset: Offset
    end_offset: Offset


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]


class TopicAdmin:
    """One broker's topic admin (see the module docstring)."""

    def __init__(
        self,
        settings: BrokerSettings,
        routing: Routing,
        peers: Peers,
        node: Callable[[], ClusterNode],
        settled: Callable[[], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.routing = routing
        self.peers = peers
        self._node = node
        self._settled = settled

    async def controller_url(self) -> str | None:
        """None when this broker is the active controller, else the controller's URL.

        While no controller is elected (an election in progress, a lease lost to a stall) this
        waits up to two leases for one; then 50305.
        """
        try:
            await self.controller()
        except NotControllerError as exc:
            if exc.controller_url is None:
                raise
            return exc.controller_url
        return None

    async def controller(self) -> Controller:
        """This broker's controller role if it is the active controller (see controller_url)."""
        deadline = time.monotonic() + 2 * self.settings.controller_lease_ms / 1000
        while True:
            try:
                return self._node().controller_for_admin()
            except NotControllerError as exc:
                if exc.controller_url is not None or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)

    async def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, Any] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> TopicDescription:
        """Create a topic (this broker must be the controller: see :meth:`controller_url`)."""
        validate_topic_name(name)
        count = self.settings.default_partitions if partitions is None else partitions
        if replica_assignment is not None and partitions is None:
            count = len(replica_assignment)
        factor = None if replication_factor in (None, -1) else replication_factor
        controller = await self.controller()
        await controller.create_topic(name, count, factor, configs, replica_assignment)
        await self._settled()
        return await self.describe_topic(name)

    async def auto_create(self, topic_name: str) -> None:
        """With BROKER_AUTO_CREATE_TOPICS, an unknown topic is created with the defaults (by the
        controller, wherever it is) before a produce goes on."""
        await self.routing.learn(topic_name)
        node = self._node()
        if not self.settings.auto_create_topics or node.image.topic(topic_name) is not None:
            return
        with contextlib.suppress(TopicAlreadyExistsError):
            url = await self.controller_url()
            if url is None:
                await self.create_topic(topic_name)
            else:
                validate_topic_name(topic_name)
                await self.peers.create_topic(url, topic_name)
        deadline = time.monotonic() + 2.0
        while node.image.topic(topic_name) is None and time.monotonic() < deadline:
            await node.follower.poll()
            await asyncio.sleep(self.settings.metadata_poll_ms / 1000)
        await self._settled()

    def list_topics(self) -> list[str]:
        return sorted(self.routing.image.topics)

    def _info(self, state: PartitionState) -> PartitionInfo:
        replicas = [ReplicaInfo(b, b == state.leader, b in state.isr) for b in state.replicas]
        info = PartitionInfo(
            state.partition,
            state.leader,
            state.leader_epoch,
            replicas,
            list(state.isr),
            Offset(-1),
            Offset(-1),
        )
        if self.routing.leads(state):
            leader = self.routing.registry.leader(state.topic, state.partition)
            if leader is not None and leader.high_watermark_known:
                info.beginning_offset = leader.plog.log_start_offset
                info.end_offset = leader.plog.high_watermark
        return info

    async def partition_info(self, topic_name: str, partition: int) -> PartitionInfo:
        state = self.routing.partition_state(topic_name, partition)
        (info,) = await self._with_offsets([self._info(state)], topic_name)
        return info

    async def _with_offsets(self, infos: list[PartitionInfo], topic: str) -> list[PartitionInfo]:
        """Offsets of partitions led elsewhere, asked of their leaders (-1 when one is down)."""

        async def fill(info: PartitionInfo) -> None:
            if info.end_offset >= 0 or info.leader < 0:
                return
            if info.leader == self.broker_id:
                return  # led here, high watermark not known yet (or not taken yet): -1 for now
            leader = self.routing.image.broker(info.leader)
            if leader is None:
                return
            found = await self.peers.offsets(leader.url, topic, info.partition)
            if found is not None:
                info.beginning_offset, info.end_offset = found

        await asyncio.gather(*(fill(i) for i in infos))
        return infos

    def list_partitions(self, name: str) -> list[PartitionInfo]:
        self.routing.topic_state(name)
        return [self._info(p) for p in self.routing.image.partitions_of(name)]

    async def describe_topic(self, name: str) -> TopicDescription:
        topic = self.routing.topic_state(name)
        infos = [self._info(p) for p in self.routing.image.partitions_of(name)]
        return TopicDescription(
            name,
            topic.topic_id,
            await self._with_offsets(infos, name),
            {**effective_configs(topic.configs), **topic.configs},
        )

    async def delete_topic(self, name: str) -> None:
        """Delete a topic everywhere; a topic created later under the name starts at 0."""
        await (await self.controller()).delete_topic(name)
        await self._settled()

    async def add_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow a topic to ``count`` partitions in total (never shrinks, as Kafka)."""
        await (await self.controller()).create_partitions(name, count)
        await self._settled()
        return await self.describe_topic(name)

    async def alter_topic_configs(
        self, name: str, set_configs: dict[str, Any], delete: list[str]
    ) -> TopicDescription:
        """Set and delete config overrides of ``name`` at once (Kafka's incremental alter).

        A deleted key goes back to its default; deleting one that is not set is no change. The
        resulting overrides are validated as a create's are, so nothing changes unless all of
        it is valid. Storage takes the new values at once: retention at its next run, segment
        sizes at the next roll, the timestamp type at the next append.
        """
        controller = await self.controller()
        self.routing.topic_state(name)
        both = sorted(set(set_configs) & set(delete))
        if both:
            raise InvalidConfigError(f"Config(s) {', '.join(both)} both set and deleted")
        await controller.alter_configs(name, set_configs, delete)
        await self._settled()
        return await self.describe_topic(name)

    async def reassign_partition(
        self, topic_name: str, partition: int, replicas: list[int]
    ) -> PartitionState:
        """Start moving a partition to ``replicas`` (this broker must be the controller).

        The new replicas are added and catch up; once all of them are in sync the replica list
        becomes ``replicas`` (the first is the preferred leader) and the others delete their
        copies. The replicas of before cancel a move in progress. Unknown or repeated brokers
        are refused (422 42206) with nothing changed.
        """
        controller = await self.controller()
        self.routing.partition_state(topic_name, partition)
        state = await controller.reassign(topic_name, partition, replicas)
        await self._settled()
        return state

    def reassignment(self, topic_name: str, partition: int) -> PartitionState:
        """The partition's replica list and reassignment in progress, from this broker's image."""
        return self.routing.partition_state(topic_name, partition)
