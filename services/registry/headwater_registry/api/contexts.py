"""The registry's root and its contexts (subjects qualified as ``:.context:subject``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from headwater_registry.api import models
from headwater_registry.api.deps import RegistryDep
from headwater_registry.api.media import RegistryJSON
from headwater_registry.api.models import READ_FAILED

router = APIRouter(tags=["registry"], default_response_class=RegistryJSON)


@router.get("/", summary="Root", response_model=dict[str, Any])
async def root() -> Response:
    return RegistryJSON({})


@router.get(
    "/contexts",
    summary="List contexts",
    response_model=list[str],
    responses=models.errors(*READ_FAILED),
)
async def contexts(registry: RegistryDep) -> Response:
    return RegistryJSON(await registry.contexts())
