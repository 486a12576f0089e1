"""Config routes: the global and per-subject compatibility level (and normalize flag).

Each operation has a global route and a subject route; both keep one route name, so OpenAPI's
operation ids stay what they were.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from headwater_registry.api import models
from headwater_registry.api.deps import Flag, RegistryDep, Subject
from headwater_registry.api.media import RegistryJSON

router = APIRouter(tags=["config"], responses=models.ERROR_RESPONSES)


@router.get(
    "/config",
    name="get_config",
    summary="Get the global compatibility level",
    response_model=models.ConfigAnswer,
)
async def get_global_config(
    registry: RegistryDep,
    defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
) -> Response:
    return RegistryJSON(await registry.get_config(None, default_to_global=defaultToGlobal))


@router.put(
    "/config",
    name="put_config",
    summary="Set the global compatibility level",
    response_model=models.ConfigUpdated,
)
async def put_global_config(registry: RegistryDep, body: models.ConfigRequest) -> Response:
    update = await registry.put_config(
        None, compatibility=body.compatibility, normalize=body.normalize
    )
    return RegistryJSON(update)


@router.delete(
    "/config",
    name="delete_config",
    summary="Delete the global compatibility level",
    response_model=models.ConfigAnswer,
)
async def delete_global_config(registry: RegistryDep) -> Response:
    return RegistryJSON(await registry.delete_config(None))


@router.get(
    "/config/{subject:subject}",
    name="get_config",
    summary="Get a subject's compatibility level",
    response_model=models.ConfigAnswer,
)
async def get_subject_config(
    registry: RegistryDep,
    subject: Subject,
    defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
) -> Response:
    return RegistryJSON(await registry.get_config(subject, default_to_global=defaultToGlobal))


@router.put(
    "/config/{subject:subject}",
    name="put_config",
    summary="Set a subject's compatibility level",
    response_model=models.ConfigUpdated,
)
async def put_subject_config(
    registry: RegistryDep, subject: Subject, body: models.ConfigRequest
) -> Response:
    update = await registry.put_config(
        subject, compatibility=body.compatibility, normalize=body.normalize
    )
    return RegistryJSON(update)


@router.delete(
    "/config/{subject:subject}",
    name="delete_config",
    summary="Delete a subject's compatibility level",
    response_model=models.ConfigAnswer,
)
async def delete_subject_config(registry: RegistryDep, subject: Subject) -> Response:
    return RegistryJSON(await registry.delete_config(subject))
