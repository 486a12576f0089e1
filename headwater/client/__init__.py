"""HTTP clients for Headwater services."""

from __future__ import annotations

from headwater.client.broker import (
    BatchAck,
    BrokerClient,
    FetchedBatches,
    PartitionDescription,
    PartitionOffsets,
    ProducedOffset,
    Replica,
    TopicDescription,
)

__all__ = [
    "BatchAck",
    "BrokerClient",
    "FetchedBatches",
    "PartitionDescription",
    "PartitionOffsets",
    "ProducedOffset",
    "Replica",
    "TopicDescription",
]
