"""HTTP clients for Headwater services."""

from __future__ import annotations

from headwater.client.broker import (
    BatchAck,
    BrokerClient,
    ClusterBroker,
    ClusterDescription,
    FetchedBatches,
    PartitionDescription,
    PartitionOffsets,
    ProducedOffset,
    ProducerIdentity,
    Replica,
    TimestampOffset,
    TopicDescription,
)
from headwater.client.cluster import ClusterClient

__all__ = [
    "BatchAck",
    "BrokerClient",
    "ClusterBroker",
    "ClusterClient",
    "ClusterDescription",
    "FetchedBatches",
    "PartitionDescription",
    "PartitionOffsets",
    "ProducedOffset",
    "ProducerIdentity",
    "Replica",
    "TimestampOffset",
    "TopicDescription",
]
