"""Offset routes: commit, read, and reset a group's committed offsets."""

from __future__ import annotations

from fastapi import APIRouter, Response

from headwater.groups.errors import (
    BrokersUnavailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupNotEmptyError,
    GroupNotFoundError,
    InvalidCommitOffsetError,
    InvalidResetError,
    InvalidTopicNameError,
    PartitionNotOwnedError,
    StaleMemberEpochError,
    UnknownMemberError,
    UnknownTopicOrPartitionError,
)
from headwater_coordinator.api import models
from headwater_coordinator.api.deps import BODY_ERRORS, GROUP_ERRORS, CoordinatorDep
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["offsets"])


@router.post(
    "/groups/{group_id}/offsets",
    status_code=204,
    summary="Commit offsets (the owner at its epoch, or any client for an empty group)",
    responses=models.error_responses(
        *GROUP_ERRORS,
        *BODY_ERRORS,
        InvalidTopicNameError,
        InvalidCommitOffsetError,
        UnknownTopicOrPartitionError,
        UnknownMemberError,
        GroupNotEmptyError,
        FencedMemberEpochError,
        StaleMemberEpochError,
        FencedInstanceIdError,
        PartitionNotOwnedError,
        BrokersUnavailableError,
    ),
)
async def commit(
    group_id: models.GroupId, body: models.CommitBody, coordinator: CoordinatorDep
) -> Response:
    await coordinator.commit(
        group_id,
        body.partition_offsets(),
        member_id=body.member_id,
        member_epoch=body.member_epoch,
    )
    return Response(status_code=204)


@router.get(
    "/groups/{group_id}/offsets",
    response_model=models.GroupOffsets,
    summary="Committed offsets of a group",
    responses=models.error_responses(*GROUP_ERRORS, GroupNotFoundError),
)
async def offsets(group_id: models.GroupId, coordinator: CoordinatorDep) -> models.GroupOffsets:
    return models.GroupOffsets.of(group_id, await coordinator.offsets(group_id))


@router.post(
    "/groups/{group_id}/offsets/reset",
    response_model=models.GroupOffsets,
    summary="Reset offsets of a group without members",
    responses=models.error_responses(
        *GROUP_ERRORS,
        *BODY_ERRORS,
        InvalidTopicNameError,
        InvalidResetError,
        InvalidCommitOffsetError,
        UnknownTopicOrPartitionError,
        GroupNotEmptyError,
        BrokersUnavailableError,
    ),
)
async def reset(
    group_id: models.GroupId, body: models.ResetBody, coordinator: CoordinatorDep
) -> models.GroupOffsets:
    committed = await coordinator.reset(
        group_id,
        body.strategy,
        topics=body.topics,
        timestamp=body.timestamp,
        offsets=body.partition_offsets(),
    )
    return models.GroupOffsets.of(group_id, committed)
