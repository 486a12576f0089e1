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
from pydantic import BaseModel, ConfigDict, Field

from headwater.errors import HeadwaterError
from headwater.groups.errors import InvalidTopicNameError
from headwater.topic_partition import PartitionKey
from headwater.types import Offset, PartitionId
from headwater_coordinator import coordinator as core
from headwater_coordinator import names
from headwater_coordinator.assignor import ASSIGNORS
from headwater_coordinator.group import GroupState
from headwater_coordinator.member import Member, encode_partitions
from headwater_coordinator.store.offsets import CommittedOffset, PartitionOffset
from headwater_kernel import openapi
from headwater_kernel.json_integer import JsonInteger

MAX_INT32 = 2**31 - 1
# Offsets and timestamps: the largest integer every JSON tool reads exactly (many hold numbers as
# doubles); far beyond any log end or epoch-ms timestamp, and well inside Kafka's 64 bits.
MAX_OFFSET = 2**53 - 1
RETRY_AFTER_S = 1


Int32 = Annotated[int, JsonInteger(-MAX_INT32 - 1, MAX_INT32)]
PartitionNumber = Annotated[int, JsonInteger(le=MAX_INT32)]  # the core refuses negatives (42201)
OffsetNumber = Annotated[int, JsonInteger(le=MAX_OFFSET)]  # likewise
NAME_SCHEMA: dict[str, Any] = {
    "pattern": f"^{names.PATTERN}$",
    "minLength": 1,
    "maxLength": names.MAX_LENGTH,
}
"""A topic name (and a group id): Kafka's rule, as the core checks it."""
ASSIGNOR_SCHEMA: dict[str, Any] = {"anyOf": [{"enum": sorted(ASSIGNORS)}, {"type": "null"}]}
NATURAL: dict[str, Any] = {"minimum": 0}
"""Partitions and offsets: the core refuses negative ones with its own code (42201)."""


def _timeout(low: int, high: int) -> dict[str, Any]:
    """A timeout field: left out, null or 0 for the default, else within [low, high] (42202)."""
    return {
        "anyOf": [
            {"type": "integer", "minimum": low, "maximum": high},
            {"const": 0},
            {"type": "null"},
        ]
    }


GroupId = Annotated[
    str, Path(description="the group (42204 if not a valid name)", json_schema_extra=NAME_SCHEMA)
]


def error_responses(*errors: type[HeadwaterError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors a route can answer with (a 503 with Retry-After)."""
    return openapi.error_responses(*errors, retry_after=True)


class TopicPartitions(BaseModel):
    topic: str = Field(json_schema_extra=NAME_SCHEMA)
    partitions: list[Annotated[int, JsonInteger(0, MAX_INT32)]]

    @classmethod
    def of(cls, tps: Iterable[PartitionKey]) -> list[TopicPartitions]:
        """One entry per topic, topics and partitions sorted."""
        return [cls(topic=t, partitions=ps) for t, ps in encode_partitions(tps).items()]


class HeartbeatBody(BaseModel):
    """Join (``member_epoch`` 0), heartbeat, or leave (-1; -2 = static member leaves for now)."""

    # Joining needs a subscription; everything else names the member (42200 otherwise).
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"member_epoch": {"const": 0}}},
            "then": {"required": ["topics"], "properties": {"topics": {"type": "array"}}},
            "else": {
                "required": ["member_id"],
                "properties": {"member_id": {"type": "string", "minLength": 1}},
            },
        }
    )

    member_id: str | None = Field(default=None, max_length=255)
    member_epoch: Annotated[int, JsonInteger(-2, MAX_INT32)]
    instance_id: str | None = Field(default=None, max_length=255)
    topics: list[Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]] | None = Field(
        default=None, description="subscription; required to join"
    )
    owned: list[TopicPartitions] | None = Field(
        default=None, description="partitions the member owns right now (releases revoked ones)"
    )
    session_timeout_ms: Int32 | None = Field(
        default=None,
        description="0 or left out: the coordinator's default",
        json_schema_extra=_timeout(core.MIN_TIMEOUT_MS, core.MAX_SESSION_TIMEOUT_MS),
    )
    rebalance_timeout_ms: Int32 | None = Field(
        default=None,
        description=f"0 or left out: {core.DEFAULT_REBALANCE_TIMEOUT_MS}",
        json_schema_extra=_timeout(core.MIN_TIMEOUT_MS, core.MAX_REBALANCE_TIMEOUT_MS),
    )
    assignor: str | None = Field(
        default=None,
        description="uniform (the default) or range (42203 otherwise)",
        json_schema_extra=ASSIGNOR_SCHEMA,
    )
    wait_ms: Int32 = Field(
        default=0,
        description="long-poll: when the answer would tell the member nothing new, hold it up "
        "to this long (at most half the session timeout) until the group changes (42202 "
        "outside the range)",
        json_schema_extra={"minimum": 0, "maximum": core.MAX_WAIT_MS},
    )

    def owned_partitions(self) -> set[PartitionKey] | None:
        if self.owned is None:
            return None
        # Checked here: an entry without partitions names a topic the set below leaves out.
        for entry in self.owned:
            if not names.is_valid(entry.topic):
                raise InvalidTopicNameError(names.describe("topic name", entry.topic))
        return {PartitionKey(o.topic, PartitionId(p)) for o in self.owned for p in o.partitions}


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
    partition: PartitionNumber = Field(description="negative: 42201", json_schema_extra=NATURAL)
    offset: OffsetNumber = Field(
        description="negative or beyond the log end: 42201",
        json_schema_extra=NATURAL,
    )
    metadata: str = Field(default="", max_length=4096)


class CommitBody(BaseModel):
    """Offsets to commit: from a member at its epoch, or without a member for an empty group."""

    # Without a member, the epoch is -1 (42200 otherwise).
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"member_id": {"type": "null"}}},
            "then": {"properties": {"member_epoch": {"const": -1}}},
        }
    )

    member_id: str | None = Field(default=None, max_length=255)
    member_epoch: Int32 = -1
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
    partition: PartitionNumber = Field(description="negative: 42201", json_schema_extra=NATURAL)
    offset: OffsetNumber = Field(
        description="negative or beyond the log end: 42201",
        json_schema_extra=NATURAL,
    )


class ResetBody(BaseModel):
    """Reset committed offsets of a group without members.

    ``earliest`` / ``latest`` / ``timestamp`` apply to every partition of ``topics``;
    ``explicit`` sets exactly ``offsets``.
    """

    # What each strategy needs (42205 without it).
    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {
                        "properties": {"strategy": {"enum": ["earliest", "latest", "timestamp"]}}
                    },
                    "then": {"required": ["topics"], "properties": {"topics": {"minItems": 1}}},
                },
                {
                    "if": {"properties": {"strategy": {"const": "timestamp"}}},
                    "then": {
                        "required": ["timestamp"],
                        "properties": {"timestamp": {"type": "integer"}},
                    },
                },
                {
                    "if": {"properties": {"strategy": {"const": "explicit"}}},
                    "then": {"required": ["offsets"], "properties": {"offsets": {"minItems": 1}}},
                },
            ]
        }
    )

    strategy: core.ResetStrategy
    topics: list[Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]] = Field(default_factory=list)
    timestamp: Annotated[int, JsonInteger(0, MAX_OFFSET)] | None = Field(
        default=None, description="epoch ms"
    )
    offsets: list[ResetPartition] = Field(default_factory=list)

    def partition_offsets(self) -> list[PartitionOffset]:
        return [
            PartitionOffset(o.topic, PartitionId(o.partition), Offset(o.offset))
            for o in self.offsets
        ]
