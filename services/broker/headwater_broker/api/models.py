"""Request and response bodies of the broker API (docs/broker-api.md), as pydantic models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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


class CreateTopic(BaseModel):
    name: str
    partitions: int | None = Field(None, description="Default: BROKER_DEFAULT_PARTITIONS")
    replication_factor: int | None = Field(
        None, description="Default (or -1): min(3, active brokers); more is refused (42204)"
    )
    configs: dict[str, Any] = Field(
        default_factory=dict, description='Kafka topic configs, e.g. {"retention.ms": "3600000"}'
    )
    replica_assignment: list[list[int]] | None = Field(
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
        default_factory=dict, description='Overrides to set, e.g. {"retention.ms": "3600000"}'
    )
    delete: list[str] = Field(
        default_factory=list, description="Overrides to remove (back to the default)"
    )


class PartitionCount(BaseModel):
    count: int = Field(description="New total number of partitions (grow only)")


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
    partition: int | None = None
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
    producer_id: int | None = Field(None, description="Give with producer_epoch to bump the epoch")
    producer_epoch: int | None = None


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


class ErrorBody(BaseModel):
    """Every error: a stable five-digit code (first three digits = HTTP status) and a message."""

    error_code: int
    message: str


class NotLeaderBody(ErrorBody):
    """421 42101: this broker does not lead the partition; go to the leader named here."""

    leader_id: int = Field(description="-1 when unknown")
    leader_url: str | None
    leader_epoch: int


RETRY_AFTER_S = 1
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying",
        "schema": {"type": "integer"},
    }
}
_DESCRIPTIONS = {
    421: "42101: not the partition's leader (the body names it)",
    503: "50302 no leader now, 50305 no controller now, 50306 metadata store unreachable; "
    "retry after Retry-After seconds",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can answer with."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "model": NotLeaderBody if status == 421 else ErrorBody,
            "description": _DESCRIPTIONS.get(status, "Error"),
        }
        if status == 503:
            entry["headers"] = _RETRY_AFTER
        out[status] = entry
    return out
