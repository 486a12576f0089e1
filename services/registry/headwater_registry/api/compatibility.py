"""Compatibility routes: would a schema be accepted, against one version or as registering would."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from headwater_registry.api import models
from headwater_registry.api.deps import Flag, RegistryDep, Subject
from headwater_registry.api.media import RegistryJSON

router = APIRouter(tags=["compatibility"], responses=models.ERROR_RESPONSES)


@router.post(
    "/compatibility/subjects/{subject:subject}/versions/{version}",
    summary="Test a schema against one version",
    response_model=models.CompatibilityAnswer,
)
async def check_version(
    registry: RegistryDep,
    subject: Subject,
    version: str,
    body: models.SchemaRequest,
    normalize: Flag = False,
    verbose: Flag = False,
) -> Response:
    result = await registry.test_compatibility(
        subject, version, body.to_input(), normalize=normalize, verbose=verbose
    )
    return RegistryJSON(result)


@router.post(
    "/compatibility/subjects/{subject:subject}/versions",
    summary="Test a schema against the versions the subject's level names",
    response_model=models.CompatibilityAnswer,
)
async def check_all(
    registry: RegistryDep,
    subject: Subject,
    body: models.SchemaRequest,
    normalize: Flag = False,
    verbose: Flag = False,
) -> Response:
    result = await registry.test_compatibility(
        subject, None, body.to_input(), normalize=normalize, verbose=verbose
    )
    return RegistryJSON(result)
