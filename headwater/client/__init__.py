"""HTTP clients for Headwater services."""

from __future__ import annotations

from headwater.client.bootstrap import BootstrapServers
from headwater.client.broker import (
    BatchAck,
    BrokerClient,
    FetchedBatches,
    PartitionDescription,
    PartitionOffsets,
    ProducedOffset,
    ProducerIdentity,
    Replica,
    TimestampOffset,
    TopicDescription,
)

__all__ = [
    "BatchAck",
    "BootstrapServers",
    "BrokerClient",
    "FetchedBatches",
    "PartitionDescription",
    "PartitionOffsets",
    "ProducedOffset",
    "ProducerIdentity",
    "Replica",
    "TimestampOffset",
    "TopicDescription",
]
