"""Config routes: the global and per-subject compatibility level (and normalize flag).

Each operation has a global route and a subject route; both keep one route name, so OpenAPI's
operation ids stay what they were.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from headwater.registry.errors import (
    InvalidCompatibilityLevelError,
    InvalidSubjectError,
    SubjectConfigNotFoundError,
)
from headwater_registry.api import models
from headwater_registry.api.deps import Flag, RegistryDep, Subject
from headwater_registry.api.media import RegistryJSON
from headwater_registry.api.models import BAD_BODY, BAD_PARAMETER, READ_FAILED, WRITE_FAILED

router = APIRouter(tags=["config"], default_response_class=RegistryJSON)


@router.get(
    "/config",
    name="get_config",
    summary="Get the global compatibility level",
    response_model=models.ConfigAnswer,
    responses=models.errors(*BAD_PARAMETER, *READ_FAILED),
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
    responses=models.errors(*BAD_BODY, InvalidCompatibilityLevelError, *WRITE_FAILED),
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
    responses=models.errors(*WRITE_FAILED),
)
async def delete_global_config(registry: RegistryDep) -> Response:
    return RegistryJSON(await registry.delete_config(None))


@router.get(
    "/config/{subject:subject}",
    name="get_config",
    summary="Get a subject's compatibility level",
    response_model=models.ConfigAnswer,
    responses=models.errors(SubjectConfigNotFoundError, *BAD_PARAMETER, *READ_FAILED),
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
    responses=models.errors(
        *BAD_BODY, InvalidCompatibilityLevelError, InvalidSubjectError, *WRITE_FAILED
    ),
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
    responses=models.errors(SubjectConfigNotFoundError, *WRITE_FAILED),
)
async def delete_subject_config(registry: RegistryDep, subject: Subject) -> Response:
    return RegistryJSON(await registry.delete_config(subject))
