"""The validation job's topic outputs: dead letters and forwarded valid records (executor side).

Records are produced with their key, value and headers unchanged, plus ``headwater.source.*``
headers saying where they came from (the deterministic key consumers can dedup on) and, for dead
letters, why they were refused. :func:`produce_partition` runs inside ``foreachPartition`` and
builds the SDK's idempotent Producer there (routing each partition to its leader); any record not
acknowledged fails the task, so the driver never records the range as produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

# Dead-letter headers added to each invalid record (its own headers are kept before them).
REASON_HEADER = "headwater.dlq.reason"
MESSAGE_HEADER = "headwater.dlq.message"
SOURCE_TOPIC_HEADER = "headwater.source.topic"
SOURCE_PARTITION_HEADER = "headwater.source.partition"
SOURCE_OFFSET_HEADER = "headwater.source.offset"
SCHEMA_ID_HEADER = "headwater.dlq.schema-id"

OUTPUT_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "key",
    "value",
    "headers",
    "reason",
    "message",
    "schema_id",
)
"""The verdict columns :func:`produce_partition` reads."""


def source_headers(topic: str, partition: int, offset: int) -> list[tuple[str, bytes | None]]:
    """Where a produced record came from: the deterministic key consumers can dedup on."""
    return [
        (SOURCE_TOPIC_HEADER, topic.encode()),
        (SOURCE_PARTITION_HEADER, str(partition).encode()),
        (SOURCE_OFFSET_HEADER, str(offset).encode()),
    ]


def dead_letter_headers(
    reason: str,
    message: str,
    topic: str,
    partition: int,
    offset: int,
    schema_id: int | None,
) -> list[tuple[str, bytes | None]]:
    """Headers that say why a record is in the dead-letter topic and where it came from."""
    headers: list[tuple[str, bytes | None]] = [
        (REASON_HEADER, reason.encode()),
        (MESSAGE_HEADER, message.encode()),
        *source_headers(topic, partition, offset),
    ]
    if schema_id is not None:
        headers.append((SCHEMA_ID_HEADER, str(schema_id).encode()))
    return headers


def produce_partition(
    brokers: list[str], topic: str, dead_letter: bool
) -> Callable[[Iterable[Any]], None]:
    """The ``foreachPartition`` function producing verdict rows to ``topic``."""

    def run(rows: Iterable[Any]) -> None:
        from headwater.producer import Producer

        failures: list[BaseException] = []

        def delivered(error: BaseException | None, _metadata: object) -> None:
            if error is not None:
                failures.append(error)

        producer = Producer(
            {"bootstrap.servers": ",".join(brokers), "enable.idempotence": True, "acks": "all"}
        )
        try:
            for row in rows:
                headers = [(h["key"], h["value"]) for h in row["headers"] or []]
                if dead_letter:
                    headers += dead_letter_headers(
                        row["reason"],
                        row["message"],
                        row["topic"],
                        row["partition"],
                        row["offset"],
                        row["schema_id"],
                    )
                else:
                    headers += source_headers(row["topic"], row["partition"], row["offset"])
                producer.produce(
                    topic,
                    value=None if row["value"] is None else bytes(row["value"]),
                    key=None if row["key"] is None else bytes(row["key"]),
                    headers=headers,
                    on_delivery=delivered,
                )
            unfinished = producer.flush(120.0)
        finally:
            producer.close(10.0)
        if unfinished or failures:
            raise RuntimeError(
                f"producing to {topic}: {unfinished} record(s) unacknowledged, "
                f"{len(failures)} record(s) failed (first: {failures[:1]})"
            )

    return run
