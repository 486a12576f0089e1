"""Request and response bodies of the broker API (docs/broker-api.md), as pydantic models."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from headwater.errors import HeadwaterError
from headwater_broker.broker import MAX_PARTITIONS
from headwater_broker.topic_config import RULES
from headwater_kernel import openapi
from headwater_kernel.json_integer import JsonInteger

TOPIC_PATTERN = r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}$"
"""Kafka's rule for topic names, as ``topic_config.validate_topic_name`` checks it at creation."""
CONFIG_KEYS: list[JsonValue] = [*sorted(RULES)]
"""The topic configs the broker knows (42202 for any other)."""


class _FromDomain(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Replica(_FromDomain):
    broker: int
    leader: bool
    in_sync: bool


class PartitionSummary(_FromDomain):
    partition: int
    leader: int
    replicas: list[Replica]


class PartitionDescription(PartitionSummary):
    beginning_offset: int = Field(description="First offset still readable (log start offset)")
    end_offset: int = Field(description="Next offset to be written (high watermark)")


class TopicDescription(_FromDomain):
    name: str
    partitions: list[PartitionDescription]
    configs: dict[str, str]


# Integer fields are integers as JSON Schema says (1 and 1.0, never "1" or true); their ranges
# are the core's to check, each with its own code.
Integer = Annotated[int, JsonInteger()]


class CreateTopic(BaseModel):
    # The constraints are documented here and checked by the core, each with its own code.
    name: str = Field(
        description="Kafka's rule (42201 otherwise)",
        json_schema_extra={"pattern": TOPIC_PATTERN, "minLength": 1, "maxLength": 249},
    )
    partitions: Integer | None = Field(
        None,
        description="1 .. 10000 (42203); default BROKER_DEFAULT_PARTITIONS",
        json_schema_extra={"minimum": 1, "maximum": MAX_PARTITIONS},
    )
    replication_factor: Integer | None = Field(
        None, description="1 (or -1 for the default) with one broker (42204)"
    )
    configs: dict[str, Any] = Field(
        default_factory=dict,
        description='Kafka topic configs, e.g. {"retention.ms": "3600000"} (42202 if unknown or '
        "a bad value)",
        json_schema_extra={"propertyNames": {"enum": CONFIG_KEYS}},
    )


class AlterConfigs(BaseModel):
    """An incremental config change: keys to set and keys to return to their defaults."""

    set: dict[str, Any] = Field(
        default_factory=dict,
        description='Overrides to set, e.g. {"retention.ms": "3600000"} (42202 if unknown or a '
        "bad value)",
        json_schema_extra={"propertyNames": {"enum": CONFIG_KEYS}},
    )
    delete: list[str] = Field(
        default_factory=list,
        description="Overrides to remove (back to the default; 42202 if unknown)",
        json_schema_extra={"items": {"type": "string", "enum": CONFIG_KEYS}},
    )


class PartitionCount(BaseModel):
    count: Integer = Field(description="New total number of partitions (grow only; 42203)")


class Offsets(BaseModel):
    beginning_offset: int
    end_offset: int


class OffsetLookup(BaseModel):
    offset: int | None = Field(description="Earliest offset with timestamp >= the asked one")
    timestamp: int | None


class ProduceHeader(BaseModel):
    key: str
    value: str | None = None


class ProduceRecord(BaseModel):
    key: Any = None
    value: Any = None
    partition: int | None = Field(None, ge=0)
    headers: list[ProduceHeader] | None = None


class ProduceRequest(BaseModel):
    """REST Proxy v2 produce body: key/value are JSON (json format) or base64 (binary format)."""

    records: list[ProduceRecord]


class ProduceOffset(BaseModel):
    partition: int
    offset: int
    error_code: int | None = None
    error: str | None = None


class ProduceResponse(BaseModel):
    offsets: list[ProduceOffset]
    key_schema_id: int | None = None
    value_schema_id: int | None = None


class BatchResult(BaseModel):
    base_offset: int
    last_offset: int
    log_append_time: int = Field(description="Append time for LogAppendTime topics, else -1")
    duplicate: bool = Field(description="A retried idempotent batch: nothing was appended")


class BatchesResponse(BaseModel):
    batches: list[BatchResult]


class InitProducer(BaseModel):
    producer_id: Integer | None = Field(
        None, description="Give with producer_epoch to bump the epoch"
    )
    producer_epoch: Integer | None = None


class ProducerIdentity(BaseModel):
    producer_id: int
    producer_epoch: int


class RecordHeader(BaseModel):
    key: str
    value: str | None


class FetchedRecord(BaseModel):
    topic: str
    key: Any
    value: Any
    partition: int
    offset: int
    timestamp: int
    headers: list[RecordHeader]


TopicName = Annotated[
    str,
    Path(
        description="A topic name: 1-249 of [A-Za-z0-9._-], not . or .. (none other can exist: "
        "40401)",
        json_schema_extra={"pattern": TOPIC_PATTERN, "minLength": 1, "maxLength": 249},
    ),
]
PartitionNumber = Annotated[
    int,
    Path(
        description=f"A partition, 0 .. partitions - 1 (at most {MAX_PARTITIONS - 1}; any other "
        "is 40402)",
        json_schema_extra={"minimum": 0, "maximum": MAX_PARTITIONS - 1},
    ),
]


def error_responses(*errors: type[HeadwaterError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors a route can answer with (kernel's format)."""
    return openapi.error_responses(*errors)
