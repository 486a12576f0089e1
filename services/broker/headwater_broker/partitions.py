"""The registry of hosted partitions: every replica this broker holds, its log and its role.

One owner for one fact (Kafka's ``ReplicaManager.allPartitions``, Redpanda's partition table).
Each :class:`HostedPartition` holds the replica's local :class:`PartitionLog` and its role now:

- **leader** -- ``leader`` is the :class:`PartitionLeader` of the current leader epoch (in-sync
  set, high watermark, acks waits); it answers follower fetches and takes appends;
- **follower** -- ``followed`` names the leader broker and the leader epoch fetched from;
- **offline** -- neither: the metadata names no leader, or names this broker before it may act.

Every path that asks "does this broker lead this partition, in which epoch" asks
:meth:`PartitionRegistry.leader` and nothing else: produce, fetch, offsets, the replica-fetch
route, describe, controlled shutdown. The roles are set by replication
(``replication/roles.py``) as the metadata applier (``replicas.py``) tells it; replicas are
added and removed here (:meth:`PartitionRegistry.host`, :meth:`PartitionRegistry.drop_topic`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from headwater.topic_partition import TopicPartition
from headwater.types import BrokerId, PartitionId
from headwater_broker import catalog, metrics
from headwater_broker.cluster.state import LeaderEpoch, TopicState
from headwater_broker.log.local_log import FsyncPolicy, partition_dir_name
from headwater_broker.log.partition import PartitionLog
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.replication.leader import PartitionLeader
from headwater_broker.topic_config import TopicConfig

log = logging.getLogger("headwater.broker")


@dataclass(eq=False)
class HostedPartition:
    """One replica held here: its local log, and its role now (see the module docstring)."""

    log: PartitionLog
    leader: PartitionLeader | None = None
    followed: tuple[BrokerId, LeaderEpoch] | None = None

    def current_leader(self) -> PartitionLeader | None:
        """The leader role while it lasts (None once resigned or never taken)."""
        leader = self.leader
        return None if leader is None or leader.resigned else leader


@dataclass(eq=False)
class HostedTopic:
    """The replicas of one topic held here (``partitions``: partition -> hosted replica)."""

    name: str
    topic_id: str
    overrides: dict[str, str]
    config: TopicConfig
    partitions: dict[int, HostedPartition] = field(default_factory=dict)


class PartitionRegistry:
    """Every hosted partition of one broker, by topic and partition."""

    def __init__(
        self,
        data_dir: Path,
        fsync: FsyncPolicy,
        producer_ids: ProducerRegistry,
    ) -> None:
        self.data_dir = data_dir
        self.fsync: FsyncPolicy = fsync
        self.producer_ids = producer_ids
        self.topics: dict[str, HostedTopic] = {}

    # --- lookups -------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> HostedPartition | None:
        local = self.topics.get(topic)
        return None if local is None else local.partitions.get(partition)

    def log_of(self, topic: str, partition: int) -> PartitionLog | None:
        """The local log of a replica held here (None when there is none, or it is closed)."""
        hosted = self.get(topic, partition)
        return None if hosted is None or hosted.log.closed else hosted.log

    def leader(self, topic: str, partition: int) -> PartitionLeader | None:
        """This broker's leader role of the partition now (None: it does not lead it)."""
        hosted = self.get(topic, partition)
        return None if hosted is None else hosted.current_leader()

    def leads(self, topic: str, partition: int, leader_epoch: LeaderEpoch) -> bool:
        """Whether this broker leads the partition in ``leader_epoch``."""
        leader = self.leader(topic, partition)
        return leader is not None and leader.leader_epoch == leader_epoch

    def __iter__(self) -> Iterator[HostedPartition]:
        for local in list(self.topics.values()):
            yield from list(local.partitions.values())

    def logs(self) -> list[PartitionLog]:
        return [hosted.log for hosted in self]

    def leaders(self) -> list[PartitionLeader]:
        """The leader roles held now."""
        return [leader for hosted in self if (leader := hosted.current_leader()) is not None]

    def leading(self) -> dict[TopicPartition, LeaderEpoch]:
        """The partitions led here, at their leader epochs."""
        return {
            TopicPartition(lead.plog.topic, lead.plog.partition): LeaderEpoch(lead.leader_epoch)
            for lead in self.leaders()
        }

    # --- hosting (applied from the metadata by ``replicas.py``) ---------------------------------

    def host(self, topic: TopicState, partition: int, now_ms: int) -> HostedPartition:
        """This broker's replica of a partition, opened (created if new) on first call."""
        local = self.topics.get(topic.name)
        if local is None:
            overrides = dict(topic.configs)
            local = HostedTopic(
                topic.name, topic.topic_id, overrides, TopicConfig.from_overrides(overrides)
            )
            self.topics[topic.name] = local
        hosted = local.partitions.get(partition)
        if hosted is None:
            directory = self.data_dir / partition_dir_name(topic.name, partition)
            catalog.claim_directory(directory, topic.topic_id)
            # Replicated: the high watermark is the in-sync replicas' (checkpointed), moved by
            # this broker's leader of the partition; with one replica, its own log end.
            plog = PartitionLog.open(
                directory,
                topic.name,
                PartitionId(partition),
                local.config,
                self.fsync,
                replicated=True,
            )
            for pid, entry in plog.producers.entries.items():
                self.producer_ids.touch(pid, min(entry.last_timestamp, now_ms))
            hosted = HostedPartition(plog)
            local.partitions[partition] = hosted
            update_offset_metrics(plog)
        return hosted

    def set_configs(self, topic: TopicState) -> None:
        """Take a topic's new config overrides (storage uses them from its next step on)."""
        local = self.topics.get(topic.name)
        if local is None or local.overrides == topic.configs:
            return
        local.overrides = dict(topic.configs)
        local.config = TopicConfig.from_overrides(local.overrides)
        for hosted in local.partitions.values():
            hosted.log.local.config = local.config
        log.info("configs of topic %s: %s", topic.name, local.overrides)

    def remove(self, topic: str, partition: int) -> HostedPartition | None:
        """Take a replica out of the registry (its role must have ended: ``roles.drop``)."""
        local = self.topics.get(topic)
        hosted = None if local is None else local.partitions.pop(partition, None)
        if local is not None and not local.partitions and self.topics.get(topic) is local:
            del self.topics[topic]
        return hosted

    async def delete(self, hosted: HostedPartition) -> None:
        """Delete a removed replica's data."""
        path = await hosted.log.delete()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
        metrics.forget_partition(hosted.log.topic, hosted.log.partition)


def update_offset_metrics(plog: PartitionLog) -> None:
    labels = (plog.topic, str(plog.partition))
    metrics.LOG_END_OFFSET.labels(*labels).set(plog.log_end_offset)
    metrics.LOG_START_OFFSET.labels(*labels).set(plog.log_start_offset)
