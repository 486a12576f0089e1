"""Request and response bodies of the coordinator's HTTP API (pydantic models)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TopicPartitions(BaseModel):
    topic: str
    partitions: list[int]


class HeartbeatBody(BaseModel):
    """Join (``member_epoch`` 0), heartbeat, or leave (-1; -2 = static member leaves for now)."""

    member_id: str | None = Field(default=None, max_length=255)
    member_epoch: int
    instance_id: str | None = Field(default=None, max_length=255)
    topics: list[str] | None = Field(default=None, description="subscription; required to join")
    owned: list[TopicPartitions] | None = Field(
        default=None, description="partitions the member owns right now (releases revoked ones)"
    )
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    assignor: str | None = Field(default=None, description="uniform (default) or range")
    wait_ms: int = Field(
        default=0,
        description="long-poll: when the answer would tell the member nothing new, hold it up "
        "to this long (at most half the session timeout) until the group changes",
    )


class HeartbeatResponse(BaseModel):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicPartitions]


class OffsetEntry(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str = Field(default="", max_length=4096)


class CommitBody(BaseModel):
    """Offsets to commit: from a member at its epoch, or without a member for an empty group."""

    member_id: str | None = None
    member_epoch: int = -1
    offsets: list[OffsetEntry]


class CommittedOffsetModel(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int


class GroupOffsets(BaseModel):
    group_id: str
    offsets: list[CommittedOffsetModel]


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


class GroupDescription(BaseModel):
    group_id: str
    state: Literal["Empty", "Reconciling", "Stable"]
    epoch: int
    assignment_epoch: int
    assignor: str
    topics: dict[str, int]
    members: list[MemberDescription]


class GroupSummary(BaseModel):
    group_id: str
    state: Literal["Empty", "Reconciling", "Stable"]
    epoch: int
    members: int


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


class ResetPartition(BaseModel):
    topic: str
    partition: int
    offset: int


class ResetBody(BaseModel):
    """Reset committed offsets of a group without members.

    ``earliest`` / ``latest`` / ``timestamp`` apply to every partition of ``topics``;
    ``explicit`` sets exactly ``offsets``.
    """

    strategy: Literal["earliest", "latest", "timestamp", "explicit"]
    topics: list[str] = Field(default_factory=list)
    timestamp: int | None = None
    offsets: list[ResetPartition] = Field(default_factory=list)
