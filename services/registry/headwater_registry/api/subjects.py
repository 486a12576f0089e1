"""Subject routes: list subjects, register and look up schemas, read and delete versions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from headwater.registry.errors import (
    IdMismatchError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaTooLargeError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from headwater_registry.api import models
from headwater_registry.api.deps import Flag, Limit, Offset, RegistryDep, Subject, Version
from headwater_registry.api.media import RegistryJSON
from headwater_registry.api.models import BAD_BODY, BAD_PARAMETER, READ_FAILED, WRITE_FAILED
from headwater_registry.subjects import Page

router = APIRouter(tags=["subjects"], default_response_class=RegistryJSON)

_VERSION_READ = (
    SubjectNotFoundError,
    VersionNotFoundError,
    *BAD_PARAMETER,
    InvalidVersionError,
    *READ_FAILED,
)
"""What reading one version (the whole answer or only its schema) can answer."""


@router.get(
    "/subjects",
    summary="List subjects",
    response_model=list[str],
    responses=models.errors(*BAD_PARAMETER, *READ_FAILED),
)
async def list_subjects(
    registry: RegistryDep,
    subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
    deleted: Flag = False,
    deletedOnly: Flag = False,  # noqa: N803 -- Confluent's name; its Python client's is below
    deleted_only: Flag = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    names = await registry.list_subjects(
        subjectPrefix,
        Page(offset, limit),
        deleted=deleted,
        deleted_only=deletedOnly or deleted_only,
    )
    return RegistryJSON(names)


@router.post(
    "/subjects/{subject:subject}",
    summary="Look up a schema under a subject",
    response_model=models.SubjectVersion,
    responses=models.errors(
        SubjectNotFoundError,
        SchemaNotFoundError,
        *BAD_BODY,
        InvalidSchemaError,
        SchemaTooLargeError,
        *READ_FAILED,
    ),
)
async def lookup(
    registry: RegistryDep,
    subject: Subject,
    body: models.SchemaRequest,
    normalize: Flag = False,
    deleted: Flag = False,
) -> Response:
    found = await registry.lookup(subject, body.to_input(), normalize=normalize, deleted=deleted)
    return RegistryJSON(found)


@router.delete(
    "/subjects/{subject:subject}",
    summary="Delete a subject (soft; permanent=true after a soft delete)",
    response_model=list[int],
    responses=models.errors(
        SubjectNotFoundError,
        SubjectSoftDeletedError,
        SubjectNotSoftDeletedError,
        *BAD_PARAMETER,
        OperationNotPermittedError,
        ReferenceExistsError,
        *WRITE_FAILED,
    ),
)
async def delete_subject(
    registry: RegistryDep, subject: Subject, permanent: Flag = False
) -> Response:
    return RegistryJSON(await registry.delete_subject(subject, permanent=permanent))


@router.get(
    "/subjects/{subject:subject}/versions",
    summary="List a subject's versions",
    response_model=list[int],
    responses=models.errors(SubjectNotFoundError, *BAD_PARAMETER, *READ_FAILED),
)
async def list_versions(
    registry: RegistryDep,
    subject: Subject,
    deleted: Flag = False,
    deletedOnly: Flag = False,  # noqa: N803 -- Confluent's name; its Python client's is below
    deleted_only: Flag = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    versions = await registry.list_versions(
        subject, Page(offset, limit), deleted=deleted, deleted_only=deletedOnly or deleted_only
    )
    return RegistryJSON(versions)


@router.post(
    "/subjects/{subject:subject}/versions",
    summary="Register a schema under a subject",
    response_model=models.RegisteredId,
    responses=models.errors(
        *BAD_BODY,
        IncompatibleSchemaError,
        InvalidSchemaError,
        InvalidVersionError,
        OperationNotPermittedError,
        IdMismatchError,
        InvalidSubjectError,
        SchemaTooLargeError,
        *WRITE_FAILED,
    ),
)
async def register(
    registry: RegistryDep,
    subject: Subject,
    body: models.SchemaRequest,
    normalize: Flag = False,
) -> Response:
    schema_id = await registry.register(
        subject, body.to_input(), normalize=normalize, schema_id=body.id, version=body.version
    )
    return RegistryJSON({"id": schema_id})


@router.get(
    "/subjects/{subject:subject}/versions/{version}",
    summary="Get a version ('latest' or -1 for the newest)",
    response_model=models.SubjectVersion,
    responses=models.errors(*_VERSION_READ),
)
async def get_version(
    registry: RegistryDep, subject: Subject, version: Version, deleted: Flag = False
) -> Response:
    return RegistryJSON(await registry.get_version(subject, version, deleted=deleted))


@router.get(
    "/subjects/{subject:subject}/versions/{version}/schema",
    summary="Get only the schema of a version",
    response_model=Any,
    responses=models.errors(*_VERSION_READ),
)
async def get_version_schema(
    registry: RegistryDep, subject: Subject, version: Version, deleted: Flag = False
) -> Response:
    return RegistryJSON(await registry.get_version_schema(subject, version, deleted=deleted))


@router.get(
    "/subjects/{subject:subject}/versions/{version}/referencedby",
    summary="Ids of schemas that reference this version",
    response_model=list[int],
    responses=models.errors(
        SubjectNotFoundError, VersionNotFoundError, InvalidVersionError, *READ_FAILED
    ),
)
async def referenced_by(registry: RegistryDep, subject: Subject, version: Version) -> Response:
    return RegistryJSON(await registry.referenced_by(subject, version))


@router.delete(
    "/subjects/{subject:subject}/versions/{version}",
    summary="Delete a version (soft; permanent=true after a soft delete)",
    response_model=int,
    responses=models.errors(
        SubjectNotFoundError,
        VersionNotFoundError,
        VersionSoftDeletedError,
        VersionNotSoftDeletedError,
        *BAD_PARAMETER,
        InvalidVersionError,
        OperationNotPermittedError,
        ReferenceExistsError,
        *WRITE_FAILED,
    ),
)
async def delete_version(
    registry: RegistryDep, subject: Subject, version: Version, permanent: Flag = False
) -> Response:
    return RegistryJSON(await registry.delete_version(subject, version, permanent=permanent))
