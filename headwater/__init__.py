"""Headwater: a Kafka-style streaming platform in Python (client SDK and shared code)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from headwater.admin import AdminClient
    from headwater.consumer import Consumer, ConsumerRecord
    from headwater.producer import Producer, RecordMetadata
    from headwater.registry.client import SchemaRegistryClient
    from headwater.registry.serde import AvroDeserializer, AvroSerializer
    from headwater.topic_partition import TopicPartition

# The SDK classes load on first use: services import ``headwater.errors`` or ``headwater.records``
# and should not pay for the HTTP client stack.
_LAZY = {
    "AdminClient": "headwater.admin",
    "Consumer": "headwater.consumer",
    "ConsumerRecord": "headwater.consumer",
    "Producer": "headwater.producer",
    "RecordMetadata": "headwater.producer",
    "TopicPartition": "headwater.topic_partition",
    "SchemaRegistryClient": "headwater.registry.client",
    "AvroSerializer": "headwater.registry.serde",
    "AvroDeserializer": "headwater.registry.serde",
}

__all__ = [
    "AdminClient",
    "AvroDeserializer",
    "AvroSerializer",
    "Consumer",
    "ConsumerRecord",
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
