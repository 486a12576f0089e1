"""``list_topics()``'s answer: topics and their partitions, shaped as confluent-kafka's metadata.

``ClusterMetadata.topics[name].partitions[id]`` has ``leader``, ``replicas`` and ``isrs`` (broker
ids), as confluent-kafka's ``ClusterMetadata`` / ``TopicMetadata`` / ``PartitionMetadata``. A
topic asked for by name that does not exist is in ``topics`` with ``error`` set (a
``TopicNotFoundError``) and no partitions, as confluent-kafka reports an unknown topic.
``brokers`` stays empty: brokers are addressed by URL (``bootstrap.servers``), and topic
descriptions name brokers only by id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.client.broker import BrokerClient, TopicDescription
from headwater.errors import HeadwaterError, TopicNotFoundError
from headwater.types import BrokerId, PartitionId


@dataclass(slots=True)
class PartitionMetadata:
    id: PartitionId
    leader: BrokerId
    replicas: list[BrokerId]
    isrs: list[BrokerId]
    error: HeadwaterError | None = None


@dataclass(slots=True)
class TopicMetadata:
    topic: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: HeadwaterError | None = None


@dataclass(slots=True)
class BrokerMetadata:
    id: BrokerId
    host: str
    port: int


@dataclass(slots=True)
class ClusterMetadata:
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    brokers: dict[BrokerId, BrokerMetadata] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    orig_broker_id: int = -1
    orig_broker_name: str | None = None


def _topic_metadata(description: TopicDescription) -> TopicMetadata:
    return TopicMetadata(
        description.name,
        {
            p.partition: PartitionMetadata(
                p.partition,
                p.leader,
                [r.broker for r in p.replicas],
                [r.broker for r in p.replicas if r.in_sync],
            )
            for p in description.partitions
        },
    )


def describe_cluster(client: BrokerClient, topic: str | None = None) -> ClusterMetadata:
    """Every topic (one request for the names, one per topic), or only ``topic``."""
    metadata = ClusterMetadata(orig_broker_name=client.base_url)
    if topic is not None:
        try:
            metadata.topics[topic] = _topic_metadata(client.describe_topic(topic))
        except TopicNotFoundError as exc:
            metadata.topics[topic] = TopicMetadata(topic, error=exc)
        return metadata
    for name in client.list_topics():
        try:
            metadata.topics[name] = _topic_metadata(client.describe_topic(name))
        except TopicNotFoundError:
            continue  # deleted since it was listed
    return metadata
