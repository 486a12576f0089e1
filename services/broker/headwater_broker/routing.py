"""Where a partition's request is served: here as its leader, relayed to the leader, or refused.

One decision for produce, fetch, offsets, replica fetches and the HTTP relays (``api/forward.py``
asks :meth:`Routing.find_leader`): the metadata image says who leads a partition in which epoch,
the partition registry says whether this broker has taken that leadership. Answers:

- ``None`` from :meth:`Routing.find_leader` -- serve here; :meth:`Routing.leader_role` gives the
  leader role of the current epoch (the only object an append or an offsets answer goes through)
  and :meth:`Routing.served_log` the log a read copies from;
- a URL -- the leader is another broker: a route relays the request there (``peers.py``), or,
  for a request that was itself relayed, answers :meth:`Routing.not_leader` (421 42101, naming the
  leader);
- 503 50302 -- no broker leads the partition now, this broker was named but has not taken the
  leadership yet, or its metadata lags the change log past ``metadata_max_lag_ms``;
- 40401 / 40402 -- no such topic or partition (a topic created a moment ago elsewhere is looked
  up in the store first).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from headwater.errors import (
    LeaderNotAvailableError,
    MetadataUnavailableError,
    NotLeaderOrFollowerError,
    PartitionNotFoundError,
    ServiceUnavailableError,
    TopicNotFoundError,
)
from headwater.types import BrokerId
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import PartitionState, TopicState
from headwater_broker.log.partition import PartitionLog
from headwater_broker.partitions import PartitionRegistry
from headwater_broker.replication.leader import PartitionLeader
from headwater_broker.settings import BrokerSettings


class Routing:
    """The serve / relay / refuse decision of one broker (see the module docstring)."""

    def __init__(
        self,
        settings: BrokerSettings,
        registry: PartitionRegistry,
        node: Callable[[], ClusterNode],
        settled: Callable[[], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.registry = registry
        self._node = node
        self._settled = settled

    @property
    def image(self) -> MetadataImage:
        return self._node().image

    def topic_state(self, name: str) -> TopicState:
        topic = self.image.topic(name)
        if topic is None:
            raise TopicNotFoundError(f"Topic not found. There is no topic '{name}'.")
        return topic

    def partition_state(self, topic_name: str, partition: int) -> PartitionState:
        image = self.image
        topic = image.topic(topic_name)
        if topic is None:
            raise TopicNotFoundError(f"Topic not found. There is no topic '{topic_name}'.")
        state = image.partition(topic_name, partition)
        if state is None:
            raise PartitionNotFoundError(
                f"Partition not found. Topic '{topic_name}' has {topic.partitions} "
                f"partition(s), 0..{topic.partitions - 1}; asked for {partition}."
            )
        return state

    def leads(self, state: PartitionState) -> bool:
        """Whether this broker leads the partition in the epoch the metadata names."""
        return state.leader == self.broker_id and self.registry.leads(
            state.topic, state.partition, state.leader_epoch
        )

    def leader_url(self, topic_name: str, partition: int) -> str | None:
        """None when this broker leads the partition, else its leader's URL.

        Raises 40401/40402 for what does not exist and 50302 when no broker leads it now.
        """
        state = self.partition_state(topic_name, partition)
        if self.leads(state):
            return None
        leader = self.image.broker(state.leader)
        if state.leader < 0 or leader is None or not leader.active:
            raise no_leader(state)
        if state.leader == self.broker_id:
            # The metadata names this broker, but it has not taken the leadership (yet).
            raise no_leader(state)
        return leader.url

    async def find_leader(self, topic_name: str, partition: int) -> str | None:
        """:meth:`leader_url`, patient with changes in flight: a topic created a moment ago
        elsewhere is looked up in the store before 40401, and a leadership the metadata has just
        given this broker is taken before answering (a quick wait), rather than 503 50302."""
        await self.learn(topic_name)
        try:
            return self.leader_url(topic_name, partition)
        except LeaderNotAvailableError:
            if self.partition_state(topic_name, partition).leader != self.broker_id:
                raise
        await self._settled()
        return self.leader_url(topic_name, partition)

    async def learn(self, topic_name: str) -> None:
        """A topic this broker has not seen is looked for in the store once (it may have been
        created through another broker a moment ago), so an admin write reads back anywhere."""
        node = self._node()
        if node.image.topic(topic_name) is None and node.follower.loaded:
            # Best effort, bounded: with the store down the answer stays this image's 40401.
            with contextlib.suppress(MetadataUnavailableError, TimeoutError):
                async with asyncio.timeout(self.settings.metadata_poll_ms / 1000 + 1.0):
                    await node.follower.poll()

    def not_leader(self, topic_name: str, partition: int) -> NotLeaderOrFollowerError:
        """The 421 for a partition this broker does not lead, naming the leader."""
        state = self.partition_state(topic_name, partition)
        leader = self.image.broker(state.leader)
        return NotLeaderOrFollowerError(
            f"Broker {self.broker_id} does not lead partition {partition} of topic "
            f"'{topic_name}'; broker {state.leader} does",
            leader_id=state.leader,
            leader_url=None if leader is None else leader.url,
            leader_epoch=state.leader_epoch,
        )

    def replica_fetch_hint(self, topic_name: str, partition: int) -> NotLeaderOrFollowerError:
        """The 42101 entry of a replica fetch for a partition this broker does not lead."""
        try:
            return self.not_leader(topic_name, partition)
        except (TopicNotFoundError, PartitionNotFoundError, ServiceUnavailableError) as exc:
            return NotLeaderOrFollowerError(exc.message)

    def served_log(self, topic_name: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads (421 elsewhere, 503 50302 when none does,
        or while this broker's metadata lags the change log past ``metadata_max_lag_ms``)."""
        state = self.partition_state(topic_name, partition)
        lag = self._node().metadata_lag_ms()
        if lag > self.settings.metadata_max_lag_ms:
            raise LeaderNotAvailableError(
                f"Broker {self.broker_id} serves no partition as leader while its metadata is "
                f"{lag:.0f} ms behind the cluster's change log (BROKER_METADATA_MAX_LAG_MS="
                f"{self.settings.metadata_max_lag_ms}): leadership may have moved; retry"
            )
        if not self.leads(state) and self.leader_url(topic_name, partition) is not None:
            raise self.not_leader(topic_name, partition)
        plog = self.registry.log_of(topic_name, partition)
        if plog is None:
            raise no_leader(state)
        return plog

    async def leader_log(self, topic_name: str, partition: int) -> PartitionLog:
        """:meth:`served_log`, as patient as :meth:`find_leader`."""
        await self.find_leader(topic_name, partition)
        return self.served_log(topic_name, partition)

    def leader_role(
        self, topic_name: str, partition: int, plog: PartitionLog | None = None
    ) -> PartitionLeader:
        """This broker's leader role of a partition in the current leader epoch (421 when
        another broker leads it, 503 50302 when none does or this one has not taken it yet).

        ``plog``: the log a request started with; a different one (the topic was deleted and
        created again meanwhile) is refused as not led here.
        """
        current = self.served_log(topic_name, partition)
        state = self.partition_state(topic_name, partition)
        leader = self.registry.leader(topic_name, partition)
        if (
            leader is None
            or leader.leader_epoch != state.leader_epoch
            or leader.plog is not current
            or (plog is not None and plog is not current)
        ):
            raise no_leader(state)
        return leader


def no_leader(state: PartitionState) -> LeaderNotAvailableError:
    return LeaderNotAvailableError(
        f"Partition {state.partition} of topic '{state.topic}' has no leader now "
        f"(leader epoch {state.leader_epoch}); retry"
    )
