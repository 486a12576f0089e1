"""The registry's root and its contexts (subjects qualified as ``:.context:subject``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from headwater_registry.api import models
from headwater_registry.api.deps import RegistryDep
from headwater_registry.api.media import RegistryJSON

router = APIRouter(tags=["registry"], responses=models.ERROR_RESPONSES)


@router.get("/", summary="Root", response_model=dict[str, Any])
async def root() -> Response:
    return RegistryJSON({})


@router.get("/contexts", summary="List contexts", response_model=list[str])
async def contexts(registry: RegistryDep) -> Response:
    return RegistryJSON(await registry.contexts())
