"""The Producer, cut along its seams as Kafka's clients cut theirs.

``producer.py`` wires the parts and owns their lifecycle; ``accumulator.py`` is the caller's
side (``produce()``, partition choice, open batches until they are sealed); ``sender.py`` ships
sealed batches (idempotence, retries); ``batch.py`` is one partition's batch, its records as
columns and then its outcome; ``futures.py`` is what ``produce()`` returns; ``reports.py``
holds delivery callbacks until ``poll()``/``flush()`` serve them; ``metadata.py`` keeps
partition counts.
"""

from __future__ import annotations

from headwater.producer.accumulator import Headers, ProducerClosedError
from headwater.producer.batch import RecordMetadata
from headwater.producer.futures import BulkDeliveryFuture, DeliveryFuture
from headwater.producer.producer import Producer
from headwater.producer.reports import DeliveryReportCallback
from headwater.producer.sender import DeliveryTimeoutError

__all__ = [
    "BulkDeliveryFuture",
    "DeliveryFuture",
    "DeliveryReportCallback",
    "DeliveryTimeoutError",
    "Headers",
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
]
