"""Headwater: a Kafka-style streaming platform in Python (client SDK and shared code)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from headwater.admin import AdminClient
    from headwater.cluster_metadata import ClusterMetadata
    from headwater.consumer import Consumer
    from headwater.message import (
        TIMESTAMP_CREATE_TIME,
        TIMESTAMP_LOG_APPEND_TIME,
        TIMESTAMP_NOT_AVAILABLE,
        Message,
    )
    from headwater.producer import Producer, RecordMetadata
    from headwater.registry.client import SchemaRegistryClient
    from headwater.registry.serde import AvroDeserializer, AvroSerializer
    from headwater.topic_partition import (
        OFFSET_BEGINNING,
        OFFSET_END,
        OFFSET_INVALID,
        OFFSET_STORED,
        TopicPartition,
    )

# The SDK classes load on first use: services import ``headwater.errors`` or ``headwater.records``
# and should not pay for the HTTP client stack.
_LAZY = {
    "AdminClient": "headwater.admin",
    "Consumer": "headwater.consumer",
    "ClusterMetadata": "headwater.cluster_metadata",
    "Message": "headwater.message",
    "Producer": "headwater.producer",
    "RecordMetadata": "headwater.producer",
    "TopicPartition": "headwater.topic_partition",
    "OFFSET_BEGINNING": "headwater.topic_partition",
    "OFFSET_END": "headwater.topic_partition",
    "OFFSET_INVALID": "headwater.topic_partition",
    "OFFSET_STORED": "headwater.topic_partition",
    "TIMESTAMP_CREATE_TIME": "headwater.message",
    "TIMESTAMP_LOG_APPEND_TIME": "headwater.message",
    "TIMESTAMP_NOT_AVAILABLE": "headwater.message",
    "SchemaRegistryClient": "headwater.registry.client",
    "AvroSerializer": "headwater.registry.serde",
    "AvroDeserializer": "headwater.registry.serde",
}

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "AdminClient",
    "AvroDeserializer",
    "AvroSerializer",
    "ClusterMetadata",
    "Consumer",
    "Message",
    "Producer",
    "RecordMetadata",
    "SchemaRegistryClient",
    "TopicPartition",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'headwater' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
