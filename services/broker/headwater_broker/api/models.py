"""Request and response bodies of the broker API (docs/broker-api.md), as pydantic models."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from headwater.errors import (
    HeadwaterError,
    LeaderNotAvailableError,
    MetadataUnavailableError,
    NotControllerError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    RequestTimedOutError,
)
from headwater_broker.cluster.controller import MAX_PARTITIONS
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
    leader: int = Field(description="The leader's broker id; -1 when the partition has none")
    leader_epoch: int = Field(description="Grows by one at each leader change")
    replicas: list[Replica] = Field(description="Replicas in preferred order (first: preferred)")
    isr: list[int] = Field(description="The in-sync replicas' broker ids")


class PartitionDescription(PartitionSummary):
    beginning_offset: int = Field(
        description="First offset still readable (log start offset); -1 when the leader is down"
    )
    end_offset: int = Field(
        description="Next offset to be written (high watermark); -1 when the leader is down"
    )


class TopicDescription(_FromDomain):
    name: str
    topic_id: str = Field(description="A new id when a deleted name is created again")
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
        None, description="Default (or -1): min(3, active brokers); more is refused (42204)"
    )
    configs: dict[str, Any] = Field(
        default_factory=dict,
        description='Kafka topic configs, e.g. {"retention.ms": "3600000"} (42202 if unknown or '
        "a bad value)",
        json_schema_extra={"propertyNames": {"enum": CONFIG_KEYS}},
    )
    replica_assignment: list[list[Integer]] | None = Field(
        None,
        description="Explicit placement: one list of broker ids per partition, the first the "
        "preferred leader (42206 for unknown or repeated brokers)",
    )


class ControllerSummary(BaseModel):
    broker_id: int = Field(description="-1 when no controller is elected")
    epoch: int


class BrokerSummary(BaseModel):
    broker_id: int
    url: str
    rack: str | None
    state: str = Field(description="active, fenced or shutting_down")


class ClusterDescription(BaseModel):
    cluster_id: str
    controller: ControllerSummary
    brokers: list[BrokerSummary]


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


class Reassign(BaseModel):
    replicas: list[int] = Field(
        description="The partition's new replica list, the first the preferred leader (42206 for "
        "unknown or repeated brokers); the replicas of before cancel a move in progress"
    )


class Reassignment(BaseModel):
    """A partition's replica list and the reassignment under way, if any."""

    topic: str
    partition: int
    in_progress: bool = Field(description="True while replicas are being added or removed")
    replicas: list[int] = Field(
        description="The current replica list: during a move, the targets followed by the "
        "replicas being removed"
    )
    target_replicas: list[int] = Field(description="The replica list once the move completes")
    adding: list[int] = Field(description="Targets that are new, catching up until in sync")
    removing: list[int] = Field(description="Replicas that leave once every target is in sync")
    isr: list[int]
    leader: int = Field(description="-1 when the partition has none")
    leader_epoch: int
    partition_epoch: int = Field(description="Grows by one at every change of the partition")


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


class NotLeaderBody(openapi.ErrorBody):
    """421 42101: this broker does not lead the partition; go to the leader named here."""

    leader_id: int = Field(description="-1 when unknown")
    leader_url: str | None
    leader_epoch: int


RETRY_AFTER_S = 1
"""The ``Retry-After`` of every 503 (no leader, no controller, metadata store unreachable)."""


# What the cluster adds to a route's answers (docs/cluster.md, "Error codes added by the
# cluster"): a route served at a partition's leader answers 421 42101 for a request relayed to it
# that it cannot serve and 503 50302 while no broker leads the partition; a write acknowledged
# by the in-sync replicas (acks=all) 503 50303/50304 or 504 50401; admin, carried out by the
# controller, 503 50305 while there is none and 503 50306 while the metadata store is unreachable.
AT_LEADER: tuple[type[HeadwaterError], ...] = (NotLeaderOrFollowerError, LeaderNotAvailableError)
REPLICATED: tuple[type[HeadwaterError], ...] = (
    NotEnoughReplicasError,
    NotEnoughReplicasAfterAppendError,
    RequestTimedOutError,
)
AT_CONTROLLER: tuple[type[HeadwaterError], ...] = (NotControllerError, MetadataUnavailableError)
# An end offset is answered once a new leader's high watermark is known (KIP-207): 503 50307.
KNOWN_END: tuple[type[HeadwaterError], ...] = (OffsetNotAvailableError,)


def error_responses(*errors: type[HeadwaterError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors a route can answer with (kernel's format): a 503
    documents ``Retry-After``, a 421 the leader its body names."""
    responses = openapi.error_responses(*errors, retry_after=True)
    if 421 in responses:
        responses[421]["model"] = NotLeaderBody
    return responses
