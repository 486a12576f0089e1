"""``list_topics()``'s answer: topics and their partitions, shaped as confluent-kafka's metadata.

``ClusterMetadata.topics[name].partitions[id]`` has ``leader``, ``replicas`` and ``isrs`` (broker
ids), as confluent-kafka's ``ClusterMetadata`` / ``TopicMetadata`` / ``PartitionMetadata``. A
topic asked for by name that does not exist is in ``topics`` with ``error`` set (a
``TopicNotFoundError``) and no partitions, as confluent-kafka reports an unknown topic.
``brokers``, ``cluster_id`` and ``controller_id`` come from ``GET /cluster``; a broker's ``host``
and ``port`` are those of its advertised URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from headwater.client.broker import TopicDescription
from headwater.client.cluster import ClusterClient
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


def describe_cluster(cluster: ClusterClient, topic: str | None = None) -> ClusterMetadata:
    """The brokers and every topic (one request for the names, one per topic), or only
    ``topic``; descriptions are read afresh, not from the routing cache."""
    metadata = ClusterMetadata()
    description = cluster.describe_cluster(fresh=True)
    if description is not None:
        metadata.cluster_id = description.cluster_id
        metadata.controller_id = description.controller_id
        for broker in description.brokers:
            url = httpx.URL(broker.url)
            port = url.port or (443 if url.scheme == "https" else 80)
            metadata.brokers[broker.broker_id] = BrokerMetadata(broker.broker_id, url.host, port)
    names = [topic] if topic is not None else cluster.call_any(lambda b: b.list_topics())
    for name in names:
        try:
            metadata.topics[name] = _topic_metadata(cluster.describe_topic(name, fresh=True))
        except TopicNotFoundError as exc:
            if topic is not None:  # asked for by name: reported, as confluent-kafka does
                metadata.topics[name] = TopicMetadata(name, error=exc)
            # otherwise deleted since it was listed
    return metadata
