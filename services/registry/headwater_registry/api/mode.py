"""Mode routes: whether the registry, or one subject, takes writes (READWRITE, READONLY, IMPORT).

Each operation has a global route and a subject route; both keep one route name, so OpenAPI's
operation ids stay what they were.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from headwater_registry.api import models
from headwater_registry.api.deps import Flag, RegistryDep, Subject
from headwater_registry.api.media import RegistryJSON

router = APIRouter(tags=["mode"], responses=models.ERROR_RESPONSES)


@router.get(
    "/mode", name="get_mode", summary="Get the global mode", response_model=models.ModeAnswer
)
async def get_global_mode(
    registry: RegistryDep,
    defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
) -> Response:
    return RegistryJSON(await registry.get_mode(None, default_to_global=defaultToGlobal))


@router.put(
    "/mode", name="put_mode", summary="Set the global mode", response_model=models.ModeAnswer
)
async def put_global_mode(
    registry: RegistryDep, body: models.ModeRequest, force: Flag = False
) -> Response:
    return RegistryJSON(await registry.put_mode(None, body.mode, force=force))


@router.delete(
    "/mode", name="delete_mode", summary="Delete the global mode", response_model=models.ModeAnswer
)
async def delete_global_mode(registry: RegistryDep) -> Response:
    return RegistryJSON(await registry.delete_mode(None))


@router.get(
    "/mode/{subject:subject}",
    name="get_mode",
    summary="Get a subject's mode",
    response_model=models.ModeAnswer,
)
async def get_subject_mode(
    registry: RegistryDep,
    subject: Subject,
    defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
) -> Response:
    return RegistryJSON(await registry.get_mode(subject, default_to_global=defaultToGlobal))


@router.put(
    "/mode/{subject:subject}",
    name="put_mode",
    summary="Set a subject's mode",
    response_model=models.ModeAnswer,
)
async def put_subject_mode(
    registry: RegistryDep, subject: Subject, body: models.ModeRequest, force: Flag = False
) -> Response:
    return RegistryJSON(await registry.put_mode(subject, body.mode, force=force))


@router.delete(
    "/mode/{subject:subject}",
    name="delete_mode",
    summary="Delete a subject's mode",
    response_model=models.ModeAnswer,
)
async def delete_subject_mode(registry: RegistryDep, subject: Subject) -> Response:
    return RegistryJSON(await registry.delete_mode(subject))
