"""The AdminClient: topic administration and offset queries with Kafka-like method names.

``list_topics()`` answers as confluent-kafka's does (a ``ClusterMetadata``); topics are created
and changed one at a time (``create_topic``, not confluent-kafka's ``create_topics([NewTopic])``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from headwater.client.broker import (
    BrokerClient,
    PartitionOffsets,
    TimestampOffset,
    TopicDescription,
)
from headwater.closeable import Closeable
from headwater.cluster_metadata import ClusterMetadata, describe_cluster
from headwater.config import AdminConfig


class AdminClient(Closeable):
    """Creates, describes, alters, grows and deletes topics, and reads partition offsets.

    Every method is one request to the first of ``bootstrap.servers``; errors are the typed
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
        self._client = BrokerClient(
            self.config.bootstrap_servers[0],
            timeout=self.config.request_timeout_ms / 1000,
            transport=transport,
            client_id=self.config.client_id,
        )

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        """Create ``name``; partitions default to the broker's BROKER_DEFAULT_PARTITIONS."""
        return self._client.create_topic(name, partitions, replication_factor, configs)

    def delete_topic(self, name: str) -> None:
        self._client.delete_topic(name)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """Every topic (or only ``topic``) with its partitions, shaped as confluent-kafka's
        ``ClusterMetadata``: ``list_topics().topics[name].partitions``. ``timeout`` is accepted
        for confluent-kafka's sake; each request is bounded by ``request.timeout.ms``."""
        return describe_cluster(self._client, topic)

    def topic_names(self) -> list[str]:
        """Headwater's shorthand: the topic names alone, in one request."""
        return self._client.list_topics()

    def describe_topic(self, name: str) -> TopicDescription:
        return self._client.describe_topic(name)

    def alter_topic_configs(
        self,
        name: str,
        set_configs: Mapping[str, str] | None = None,
        delete: Sequence[str] = (),
    ) -> TopicDescription:
        """Set and delete config overrides of ``name`` in one change (Kafka's incremental alter):
        a deleted key returns to its default; nothing changes unless the result is valid."""
        return self._client.alter_configs(name, set_configs, delete)

    def create_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow ``name`` to ``count`` partitions in total (never shrinks)."""
        return self._client.create_partitions(name, count)

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        """The partition's beginning (log start) and end (next to be written) offsets."""
        return self._client.offsets(topic, partition)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> TimestampOffset:
        """The earliest offset with a timestamp >= ``timestamp`` and its timestamp, or Nones."""
        return self._client.offset_for_timestamp(topic, partition, timestamp)

    def close(self) -> None:
        self._client.close()
