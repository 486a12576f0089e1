"""Membership route: one heartbeat joins, reconciles or leaves a group."""

from __future__ import annotations

from fastapi import APIRouter

from headwater.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    InvalidTimeoutError,
    InvalidTopicNameError,
    UnknownMemberError,
    UnsupportedAssignorError,
)
from headwater_coordinator.api import models
from headwater_coordinator.api.deps import BODY_ERRORS, GROUP_ERRORS, CoordinatorDep
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["membership"])


@router.post(
    "/groups/{group_id}/heartbeat",
    response_model=models.HeartbeatResponse,
    summary="Join (epoch 0), heartbeat and reconcile, or leave (-1, static -2)",
    responses=models.error_responses(
        *GROUP_ERRORS,
        *BODY_ERRORS,
        UnknownMemberError,
        FencedMemberEpochError,
        FencedInstanceIdError,
        InvalidTimeoutError,
        UnsupportedAssignorError,
        InvalidTopicNameError,
    ),
)
async def heartbeat(
    group_id: models.GroupId, body: models.HeartbeatBody, coordinator: CoordinatorDep
) -> models.HeartbeatResponse:
    answer = await coordinator.heartbeat(
        group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        topics=body.topics,
        owned=body.owned_partitions(),
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        assignor=body.assignor,
        wait_ms=body.wait_ms,
    )
    return models.HeartbeatResponse.of(answer)
