"""Request and response bodies of the coordinator's HTTP API (pydantic models), how each is made
from, or turned into, the core's types, and how errors are documented (:func:`error_responses`).

Where the core checks a value with its own error code (a topic name: 42206; a negative offset:
42201), the constraint is documented here but not enforced by pydantic, which would answer the
generic 42200 first; ranges the core does not check (64-bit offsets) are enforced here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, Field

from headwater.errors import HeadwaterError
from headwater.topic_partition import TopicPartition
from headwater.types import Offset, PartitionId
from headwater_coordinator import coordinator as core
from headwater_coordinator import names
from headwater_coordinator.group import GroupState, Member, encode_partitions
from headwater_coordinator.store.offsets import CommittedOffset, PartitionOffset

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
RETRY_AFTER_S = 1
NAME_SCHEMA: dict[str, Any] = {
    "pattern": f"^{names.PATTERN}$",
    "minLength": 1,
    "maxLength": names.MAX_LENGTH,
}
"""A topic name (and a group id): Kafka's rule, as the core checks it."""

GroupId = Annotated[
    str, Path(description="the group (42204 if not a valid name)", json_schema_extra=NAME_SCHEMA)
]


class ErrorBody(BaseModel):
    """Every error: a stable five-digit code (first three digits = HTTP status) and a message."""

    error_code: int
    message: str


def error_responses(*errors: type[HeadwaterError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors a route can answer with: per status, the error body
    and the codes it carries; a 503 also documents ``Retry-After``."""
    by_status: dict[int, list[type[HeadwaterError]]] = {}
    for error in sorted(set(errors), key=lambda e: e.error_code):
        by_status.setdefault(error.http_status, []).append(error)
    responses: dict[int | str, dict[str, Any]] = {}
    for status, group in sorted(by_status.items()):
        entry: dict[str, Any] = {
            "model": ErrorBody,
            "description": "\n".join(f"- {e.error_code}: {e.default_message()}" for e in group),
        }
        if status == 503:
            entry["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait before sending the request again",
                    "schema": {"type": "integer"},
                }
            }
        responses[status] = entry
    return responses


class TopicPartitions(BaseModel):
    topic: str = Field(json_schema_extra=NAME_SCHEMA)
    partitions: list[Annotated[int, Field(ge=0, le=MAX_INT32)]]

    @classmethod
    def of(cls, tps: Iterable[TopicPartition]) -> list[TopicPartitions]:
        """One entry per topic, topics and partitions sorted."""
        return [cls(topic=t, partitions=ps) for t, ps in encode_partitions(tps).items()]


class HeartbeatBody(BaseModel):
    """Join (``member_epoch`` 0), heartbeat, or leave (-1; -2 = static member leaves for now)."""

    member_id: str | None = Field(default=None, max_length=255)
    member_epoch: int = Field(ge=-2, le=MAX_INT32)
    instance_id: str | None = Field(default=None, max_length=255)
    topics: list[Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]] | None = Field(
        default=None, description="subscription; required to join"
    )
    owned: list[TopicPartitions] | None = Field(
        default=None, description="partitions the member owns right now (releases revoked ones)"
    )
    session_timeout_ms: int | None = Field(
        default=None,
        description=f"0 or left out: the coordinator's default; else "
        f"[{core.MIN_TIMEOUT_MS}, {core.MAX_SESSION_TIMEOUT_MS}] (42202 outside)",
    )
    rebalance_timeout_ms: int | None = Field(
        default=None,
        description=f"0 or left out: {core.DEFAULT_REBALANCE_TIMEOUT_MS}; else "
        f"[{core.MIN_TIMEOUT_MS}, {core.MAX_REBALANCE_TIMEOUT_MS}] (42202 outside)",
    )
    assignor: str | None = Field(default=None, description="uniform (default) or range")
    wait_ms: int = Field(
        default=0,
        description="long-poll: when the answer would tell the member nothing new, hold it up "
        "to this long (at most half the session timeout) until the group changes; "
        f"[0, {core.MAX_WAIT_MS}] (42202 outside)",
    )

    def owned_partitions(self) -> set[TopicPartition] | None:
        if self.owned is None:
            return None
        return {TopicPartition(o.topic, PartitionId(p)) for o in self.owned for p in o.partitions}


class HeartbeatResponse(BaseModel):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicPartitions]

    @classmethod
    def of(cls, answer: core.HeartbeatAnswer) -> HeartbeatResponse:
        return cls(
            member_id=answer.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=answer.heartbeat_interval_ms,
            assignment=TopicPartitions.of(answer.assignment),
        )


class OffsetEntry(BaseModel):
    topic: str = Field(json_schema_extra=NAME_SCHEMA)
    partition: int = Field(le=MAX_INT32, description="negative: 42201")
    offset: int = Field(le=MAX_INT64, description="negative or beyond the log end: 42201")
    metadata: str = Field(default="", max_length=4096)


class CommitBody(BaseModel):
    """Offsets to commit: from a member at its epoch, or without a member for an empty group."""

    member_id: str | None = Field(default=None, max_length=255)
    member_epoch: int = Field(default=-1, ge=-MAX_INT32 - 1, le=MAX_INT32)
    offsets: list[OffsetEntry]

    def partition_offsets(self) -> list[PartitionOffset]:
        return [
            PartitionOffset(o.topic, PartitionId(o.partition), Offset(o.offset), o.metadata)
            for o in self.offsets
        ]


class CommittedOffsetModel(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int


class GroupOffsets(BaseModel):
    group_id: str
    offsets: list[CommittedOffsetModel]

    @classmethod
    def of(cls, group_id: str, committed: Iterable[CommittedOffset]) -> GroupOffsets:
        return cls(
            group_id=group_id,
            offsets=[
                CommittedOffsetModel(
                    topic=c.topic,
                    partition=c.partition,
                    offset=c.offset,
                    metadata=c.metadata,
                    commit_timestamp=c.commit_timestamp,
                )
                for c in committed
            ],
        )


class MemberDescription(BaseModel):
    member_id: str
    instance_id: str | None
    member_epoch: int
    topics: list[str]
    assignment: list[TopicPartitions]
    revoking: list[TopicPartitions]
    target: list[TopicPartitions]
    session_timeout_ms: int
    last_heartbeat_ms: int

    @classmethod
    def of(cls, m: Member) -> MemberDescription:
        return cls(
            member_id=m.member_id,
            instance_id=m.instance_id,
            member_epoch=m.epoch,
            topics=sorted(m.topics),
            assignment=TopicPartitions.of(m.assigned),
            revoking=TopicPartitions.of(m.revoking),
            target=TopicPartitions.of(m.target),
            session_timeout_ms=m.session_timeout_ms,
            last_heartbeat_ms=m.last_heartbeat_ms,
        )


class GroupDescription(BaseModel):
    group_id: str
    state: Literal["Empty", "Reconciling", "Stable"]
    epoch: int
    assignment_epoch: int
    assignor: str
    topics: dict[str, int]
    members: list[MemberDescription]

    @classmethod
    def of(cls, state: GroupState) -> GroupDescription:
        members = sorted(state.members.values(), key=lambda m: m.member_id)
        return cls(
            group_id=state.group_id,
            state=state.status,
            epoch=state.epoch,
            assignment_epoch=state.assignment_epoch,
            assignor=state.assignor,
            topics=state.topics,
            members=[MemberDescription.of(m) for m in members],
        )


class GroupSummary(BaseModel):
    group_id: str
    state: Literal["Empty", "Reconciling", "Stable"]
    epoch: int
    members: int

    @classmethod
    def of(cls, state: GroupState) -> GroupSummary:
        return cls(
            group_id=state.group_id,
            state=state.status,
            epoch=state.epoch,
            members=len(state.members),
        )


class PartitionLag(BaseModel):
    topic: str
    partition: int
    member_id: str | None
    committed_offset: int | None
    end_offset: int
    lag: int = Field(description="end offset minus committed (or minus beginning if none)")


class GroupLag(BaseModel):
    group_id: str
    total_lag: int
    partitions: list[PartitionLag]

    @classmethod
    def of(cls, lag: core.GroupLag) -> GroupLag:
        return cls(
            group_id=lag.group_id,
            total_lag=lag.total_lag,
            partitions=[
                PartitionLag(
                    topic=p.topic,
                    partition=p.partition,
                    member_id=p.member_id,
                    committed_offset=p.committed_offset,
                    end_offset=p.end_offset,
                    lag=p.lag,
                )
                for p in lag.partitions
            ],
        )


class ResetPartition(BaseModel):
    topic: str = Field(json_schema_extra=NAME_SCHEMA)
    partition: int = Field(le=MAX_INT32, description="negative: 42201")
    offset: int = Field(le=MAX_INT64, description="negative or beyond the log end: 42201")


class ResetBody(BaseModel):
    """Reset committed offsets of a group without members.

    ``earliest`` / ``latest`` / ``timestamp`` apply to every partition of ``topics``;
    ``explicit`` sets exactly ``offsets``.
    """

    strategy: core.ResetStrategy
    topics: list[Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]] = Field(default_factory=list)
    timestamp: int | None = Field(default=None, ge=0, le=MAX_INT64, description="epoch ms")
    offsets: list[ResetPartition] = Field(default_factory=list)

    def partition_offsets(self) -> list[PartitionOffset]:
        return [
            PartitionOffset(o.topic, PartitionId(o.partition), Offset(o.offset))
            for o in self.offsets
        ]
