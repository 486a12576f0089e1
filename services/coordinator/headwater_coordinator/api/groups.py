"""Group admin routes: list, describe, lag, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response

from headwater.groups.errors import (
    BrokersUnavailableError,
    GroupNotEmptyError,
    GroupNotFoundError,
    StoreUnavailableError,
)
from headwater_coordinator.api import models
from headwater_coordinator.api.deps import GROUP_ERRORS, CoordinatorDep
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["admin"])


@router.get(
    "/groups",
    response_model=list[models.GroupSummary],
    summary="List groups",
    responses=models.error_responses(StoreUnavailableError),
)
async def list_groups(coordinator: CoordinatorDep) -> list[models.GroupSummary]:
    return [models.GroupSummary.of(state) for state in await coordinator.list_groups()]


@router.get(
    "/groups/{group_id}",
    response_model=models.GroupDescription,
    summary="State, epochs, members and assignment of a group",
    responses=models.error_responses(*GROUP_ERRORS, GroupNotFoundError),
)
async def describe(
    group_id: models.GroupId, coordinator: CoordinatorDep
) -> models.GroupDescription:
    return models.GroupDescription.of(await coordinator.describe(group_id))


@router.get(
    "/groups/{group_id}/lag",
    response_model=models.GroupLag,
    summary="Committed offsets against the brokers' end offsets",
    responses=models.error_responses(*GROUP_ERRORS, GroupNotFoundError, BrokersUnavailableError),
)
async def lag(group_id: models.GroupId, coordinator: CoordinatorDep) -> models.GroupLag:
    return models.GroupLag.of(await coordinator.lag(group_id))


@router.delete(
    "/groups/{group_id}",
    status_code=204,
    summary="Delete a group without members, with its offsets",
    responses=models.error_responses(*GROUP_ERRORS, GroupNotFoundError, GroupNotEmptyError),
)
async def delete(group_id: models.GroupId, coordinator: CoordinatorDep) -> Response:
    await coordinator.delete(group_id)
    return Response(status_code=204)
