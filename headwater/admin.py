"""The AdminClient: topic administration and offset queries with Kafka-like method names.

``list_topics()`` answers as confluent-kafka's does (a ``ClusterMetadata``); topics are created
and changed one at a time (``create_topic``, not confluent-kafka's ``create_topics([NewTopic])``).
Partition reassignment, which confluent-kafka does not have, takes the names and shapes of Kafka's
Java AdminClient (``alter_partition_reassignments``, ``list_partition_reassignments``), answered
at once rather than as futures.

Topic admin goes to any broker of the cluster (the broker forwards it to the controller);
offsets go to the partition's leader. Both move on to another broker when one does not answer
and retry the retriable answers (no controller or leader right now, 503) until
``request.timeout.ms`` (:mod:`headwater.client.cluster`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import httpx

from headwater.client.broker import (
    ClusterDescription,
    PartitionOffsets,
    PartitionReassignment,
    TimestampOffset,
    TopicDescription,
)
from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.cluster_metadata import ClusterMetadata, describe_cluster
from headwater.config import AdminConfig
from headwater.topic_partition import TopicPartition


class AdminClient(Closeable):
    """Creates, describes, alters, grows and deletes topics, moves partitions to new replicas,
    and reads partition offsets.

    Each method is one request to a broker of the cluster, retried on another broker after a
    connection error (for a request that changes something, only when it cannot have been
    sent) and after retriable answers, up to ``request.timeout.ms``; errors are the typed
    errors of ``headwater.errors`` (``TopicAlreadyExistsError``, ``TopicNotFoundError``,
    ``InvalidConfigError``, ...).
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = AdminConfig.from_dict(config or {})
        self._cluster = ClusterClient.of_client(self.config, transport=transport)

    def describe_cluster(self) -> ClusterDescription | None:
        """The cluster id, controller and brokers (``GET /cluster``); None from brokers that
        predate the cluster."""
        return self._cluster.describe_cluster(fresh=True)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        """Create ``name``; partitions default to the broker's BROKER_DEFAULT_PARTITIONS."""
        return self._cluster.call_any(
            lambda b: b.create_topic(name, partitions, replication_factor, configs), resend=False
        )

    def delete_topic(self, name: str) -> None:
        self._cluster.call_any(lambda b: b.delete_topic(name), resend=False)
        self._cluster.invalidate(name)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """Every topic (or only ``topic``) with its partitions, and the brokers, shaped as
        confluent-kafka's ``ClusterMetadata``: ``list_topics().topics[name].partitions``.
        ``timeout`` is accepted for confluent-kafka's sake; each request is bounded by
        ``request.timeout.ms``."""
        return describe_cluster(self._cluster, topic)

    def topic_names(self) -> list[str]:
        """Headwater's shorthand: the topic names alone, in one request."""
        return self._cluster.call_any(lambda b: b.list_topics())

    def describe_topic(self, name: str) -> TopicDescription:
        return self._cluster.call_any(lambda b: b.describe_topic(name))

    def alter_topic_configs(
        self,
        name: str,
        set_configs: Mapping[str, str] | None = None,
        delete: Sequence[str] = (),
    ) -> TopicDescription:
        """Set and delete config overrides of ``name`` in one change (Kafka's incremental alter):
        a deleted key returns to its default; nothing changes unless the result is valid."""
        return self._cluster.call_any(lambda b: b.alter_configs(name, set_configs, delete))

    def create_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow ``name`` to ``count`` partitions in total (never shrinks)."""
        described = self._cluster.call_any(lambda b: b.create_partitions(name, count), resend=False)
        self._cluster.invalidate(name)
        return described

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Move each partition to its new replica list (broker ids, the first the preferred
        leader), or with ``None`` cancel the move in progress, as Kafka's
        ``alterPartitionReassignments`` with ``Optional.empty()``; the state of each once its
        move started.

        A move adds the new replicas, which catch up and join the ISR; then the list switches
        and the others delete their copies. Cancelling reassigns to
        :attr:`PartitionReassignment.original_replicas`: the added replicas leave (a ``None``
        for a partition with no move in progress sends nothing). One request per partition, in
        the mapping's order; the first refusal raises (``InvalidReplicaAssignmentError`` for
        an empty list or unknown or repeated brokers, ``TopicNotFoundError``,
        ``PartitionNotFoundError``) and the moves started before it go on.
        """
        states: dict[TopicPartition, PartitionReassignment] = {}
        for tp, replicas in reassignments.items():
            states[tp] = self._reassign(tp.topic, tp.partition, replicas)
        return states

    def _reassign(
        self, topic: str, partition: int, replicas: Sequence[int] | None
    ) -> PartitionReassignment:
        if replicas is None:
            now = self._reassignment(topic, partition)
            if not now.in_progress:
                return now
            replicas = now.original_replicas
        target = list(replicas)
        # Re-sent after a lost answer, the same list is the same move (or no change): safe.
        state = self._cluster.call_any(lambda b: b.reassign_partition(topic, partition, target))
        self._cluster.invalidate(topic)
        return state

    def _reassignment(self, topic: str, partition: int) -> PartitionReassignment:
        return self._cluster.call_any(lambda b: b.partition_reassignment(topic, partition))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The replicas and reassignment state of each of ``partitions`` (one request each).

        Unlike Kafka's ``listPartitionReassignments``, every partition asked is answered, moving
        or not: filter on ``in_progress`` for the moves alone.
        """
        return {tp: self._reassignment(tp.topic, tp.partition) for tp in partitions}

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        """The partition's beginning (log start) and end (next to be written) offsets."""
        return self._cluster.call_leader(topic, partition, lambda b: b.offsets(topic, partition))

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> TimestampOffset:
        """The earliest offset with a timestamp >= ``timestamp`` and its timestamp, or Nones."""
        return self._cluster.call_leader(
            topic, partition, lambda b: b.offset_for_timestamp(topic, partition, timestamp)
        )

    def close(self) -> None:
        self._cluster.close()
