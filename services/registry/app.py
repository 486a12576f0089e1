"""The registry's HTTP API: Confluent Schema Registry's routes, each calling one domain method."""

# No `from __future__ import annotations`: the config and mode routes are built per scope in a
# function, and FastAPI must see their local Annotated dependency types at definition time.

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Path, Query, Request
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import Response

from headwater.registry.errors import REGISTRY, RegistryError, UnprocessableEntityError
from headwater.service import JSONBody, create_service_app, error_response
from services.registry import models
from services.registry.registry import Registry, SchemaInput
from services.registry.routing import SLASH, RegistryRouting
from services.registry.settings import RegistrySettings
from services.registry.store import SQLStore

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
log = logging.getLogger("headwater.registry")


class RegistryJSON(JSONBody):
    media_type = MEDIA_TYPE


# Dependencies are ``async def`` because FastAPI runs plain ``def`` ones in its thread pool, which
# would cost a thread hop even on the cached, never-blocking id read.
async def _subject(subject: Annotated[str, Path(description="subject name; '/' as %2F")]) -> str:
    return subject.replace(SLASH, "/")


async def _registry(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


Subject = Annotated[str, Depends(_subject)]
Reg = Annotated[Registry, Depends(_registry)]
Flag = Annotated[bool, Query()]
Offset = Annotated[int, Query(ge=0)]
Limit = Annotated[int, Query(description="-1 or 0: no limit")]


def _input(body: models.SchemaRequest) -> SchemaInput:
    refs = tuple(r.to_reference() for r in body.references)
    return SchemaInput(body.schema_text, body.schemaType, refs)


def create_app(settings: RegistrySettings) -> FastAPI:
    """The registry app over the database at ``settings.database_url``."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = await anyio.to_thread.run_sync(SQLStore, settings.database_url)
        app.state.registry = Registry(store, settings.default_compatibility)
        try:
            yield
        finally:
            store.close()

    async def ready() -> tuple[bool, dict[str, Any]]:
        try:
            await anyio.to_thread.run_sync(app.state.registry.ready)
        except Exception as e:  # any database failure means not ready
            return False, {"database": f"{type(e).__name__}: {e}"}
        return True, {"database": "ok"}

    app = create_service_app(
        title="Headwater schema registry",
        description="Confluent Schema Registry REST API for Avro schemas, over SQLite or "
        "PostgreSQL.",
        family=REGISTRY,
        lifespan=lifespan,
        ready=ready,
        media_type=MEDIA_TYPE,
        validation_error=UnprocessableEntityError,
    )
    app.add_middleware(RegistryRouting, media_type=MEDIA_TYPE)

    async def on_store_error(request: Request, exc: Exception) -> Response:
        # The database failing (down, timed out) is Confluent's 50001 "error in the backend
        # data store", not an anonymous 500.
        log.warning("store error on %s %s: %s", request.method, request.url.path, exc)
        reason = str(exc).splitlines()[0][:300]
        error = RegistryError(f"Error in the backend data store: {type(exc).__name__}: {reason}")
        return error_response(error, MEDIA_TYPE)

    app.add_exception_handler(SQLAlchemyError, on_store_error)
    _subject_routes(app)
    _schema_routes(app)
    _config_routes(app)
    _mode_routes(app)
    _compatibility_routes(app)
    return app


def _subject_routes(app: FastAPI) -> None:
    @app.get("/subjects", summary="List subjects", response_model=list[str], tags=["subjects"])
    def list_subjects(
        registry: Reg,
        subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
        deleted: Flag = False,
        deletedOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        deleted_only: Flag = False,
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        only = deletedOnly or deleted_only
        return RegistryJSON(registry.list_subjects(subjectPrefix, deleted, only, offset, limit))

    @app.post(
        "/subjects/{subject}",
        summary="Look up a schema under a subject",
        response_model=models.SubjectVersion,
        tags=["subjects"],
    )
    def lookup(
        registry: Reg,
        subject: Subject,
        body: models.SchemaRequest,
        normalize: Flag = False,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(registry.lookup(subject, _input(body), normalize, deleted))

    @app.delete(
        "/subjects/{subject}",
        summary="Delete a subject (soft; permanent=true after a soft delete)",
        response_model=list[int],
        tags=["subjects"],
    )
    def delete_subject(registry: Reg, subject: Subject, permanent: Flag = False) -> Response:
        return RegistryJSON(registry.delete_subject(subject, permanent))

    @app.get(
        "/subjects/{subject}/versions",
        summary="List a subject's versions",
        response_model=list[int],
        tags=["subjects"],
    )
    def list_versions(
        registry: Reg,
        subject: Subject,
        deleted: Flag = False,
        deletedOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        deleted_only: Flag = False,
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        only = deletedOnly or deleted_only
        return RegistryJSON(registry.list_versions(subject, deleted, only, offset, limit))

    @app.post(
        "/subjects/{subject}/versions",
        summary="Register a schema under a subject",
        response_model=models.RegisteredId,
        tags=["subjects"],
    )
    def register(
        registry: Reg, subject: Subject, body: models.SchemaRequest, normalize: Flag = False
    ) -> Response:
        schema_id = registry.register(subject, _input(body), normalize, body.id, body.version)
        return RegistryJSON({"id": schema_id})

    @app.get(
        "/subjects/{subject}/versions/{version}",
        summary="Get a version ('latest' or -1 for the newest)",
        response_model=models.SubjectVersion,
        tags=["subjects"],
    )
    def get_version(
        registry: Reg, subject: Subject, version: str, deleted: Flag = False
    ) -> Response:
        return RegistryJSON(registry.get_version(subject, version, deleted))

    @app.get(
        "/subjects/{subject}/versions/{version}/schema",
        summary="Get only the schema of a version",
        response_model=Any,
        tags=["subjects"],
    )
    def get_version_schema(
        registry: Reg, subject: Subject, version: str, deleted: Flag = False
    ) -> Response:
        return RegistryJSON(registry.get_version_schema(subject, version, deleted))

    @app.get(
        "/subjects/{subject}/versions/{version}/referencedby",
        summary="Ids of schemas that reference this version",
        response_model=list[int],
        tags=["subjects"],
    )
    def referenced_by(registry: Reg, subject: Subject, version: str) -> Response:
        return RegistryJSON(registry.referenced_by(subject, version))

    @app.delete(
        "/subjects/{subject}/versions/{version}",
        summary="Delete a version (soft; permanent=true after a soft delete)",
        response_model=int,
        tags=["subjects"],
    )
    def delete_version(
        registry: Reg, subject: Subject, version: str, permanent: Flag = False
    ) -> Response:
        return RegistryJSON(registry.delete_version(subject, version, permanent))


def _schema_routes(app: FastAPI) -> None:
    @app.get("/", summary="Root", response_model=dict[str, Any], tags=["registry"])
    async def root() -> Response:
        return RegistryJSON({})

    @app.get(
        "/schemas/ids/{id}",
        summary="Get a schema by global id",
        response_model=models.SchemaById,
        tags=["schemas"],
    )
    async def schema_by_id(
        registry: Reg,
        id: int,
        subject: str | None = None,
    ) -> Response:
        body = await registry.schema_body(id)
        return Response(body, media_type=MEDIA_TYPE)

    @app.get(
        "/schemas/ids/{id}/schema",
        summary="Get only the schema by global id",
        response_model=Any,
        tags=["schemas"],
    )
    def schema_text(registry: Reg, id: int) -> Response:
        return RegistryJSON(registry.schema_text(id))

    @app.get(
        "/schemas/ids/{id}/subjects",
        summary="Subjects that use a schema id",
        response_model=list[str],
        tags=["schemas"],
    )
    def schema_subjects(
        registry: Reg,
        id: int,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(registry.schema_subjects(id, deleted))

    @app.get(
        "/schemas/ids/{id}/versions",
        summary="Subject versions that use a schema id",
        response_model=list[models.SubjectVersionPair],
        tags=["schemas"],
    )
    def schema_versions(
        registry: Reg,
        id: int,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(registry.schema_versions(id, deleted))

    @app.get(
        "/schemas",
        summary="List schemas (subject versions)",
        response_model=list[models.SubjectVersion],
        tags=["schemas"],
    )
    def list_schemas(
        registry: Reg,
        subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
        deleted: Flag = False,
        latestOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        return RegistryJSON(
            registry.list_schemas(subjectPrefix, deleted, latestOnly, offset, limit)
        )

    @app.get(
        "/schemas/types",
        summary="Supported schema types",
        response_model=list[str],
        tags=["schemas"],
    )
    async def schema_types() -> Response:
        return RegistryJSON(Registry.schema_types())

    @app.get("/contexts", summary="List contexts", response_model=list[str], tags=["registry"])
    def contexts(registry: Reg) -> Response:
        return RegistryJSON(registry.contexts())


def _config_routes(app: FastAPI) -> None:
    for path, scoped in (("/config", False), ("/config/{subject}", True)):
        _config_route_set(app, path, scoped)


def _config_route_set(app: FastAPI, path: str, scoped: bool) -> None:
    what = "a subject's" if scoped else "the global"

    async def no_subject() -> None:
        return None

    SubjectOrGlobal = Annotated[str | None, Depends(_subject if scoped else no_subject)]  # noqa: N806

    @app.get(
        path,
        summary=f"Get {what} compatibility level",
        response_model=models.ConfigAnswer,
        tags=["config"],
    )
    def get_config(
        registry: Reg,
        subject: SubjectOrGlobal,
        defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
    ) -> Response:
        return RegistryJSON(registry.get_config(subject, defaultToGlobal))

    @app.put(
        path,
        summary=f"Set {what} compatibility level",
        response_model=models.ConfigUpdated,
        tags=["config"],
    )
    def put_config(registry: Reg, subject: SubjectOrGlobal, body: models.ConfigRequest) -> Response:
        return RegistryJSON(registry.put_config(subject, body.compatibility, body.normalize))

    @app.delete(
        path,
        summary=f"Delete {what} compatibility level",
        response_model=models.ConfigAnswer,
        tags=["config"],
    )
    def delete_config(registry: Reg, subject: SubjectOrGlobal) -> Response:
        return RegistryJSON(registry.delete_config(subject))


def _mode_routes(app: FastAPI) -> None:
    for path, scoped in (("/mode", False), ("/mode/{subject}", True)):
        _mode_route_set(app, path, scoped)


def _mode_route_set(app: FastAPI, path: str, scoped: bool) -> None:
    what = "a subject's" if scoped else "the global"

    async def no_subject() -> None:
        return None

    SubjectOrGlobal = Annotated[str | None, Depends(_subject if scoped else no_subject)]  # noqa: N806

    @app.get(path, summary=f"Get {what} mode", response_model=models.ModeAnswer, tags=["mode"])
    def get_mode(
        registry: Reg,
        subject: SubjectOrGlobal,
        defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
    ) -> Response:
        return RegistryJSON(registry.get_mode(subject, defaultToGlobal))

    @app.put(path, summary=f"Set {what} mode", response_model=models.ModeAnswer, tags=["mode"])
    def put_mode(
        registry: Reg, subject: SubjectOrGlobal, body: models.ModeRequest, force: Flag = False
    ) -> Response:
        return RegistryJSON(registry.put_mode(subject, body.mode, force))

    @app.delete(
        path, summary=f"Delete {what} mode", response_model=models.ModeAnswer, tags=["mode"]
    )
    def delete_mode(registry: Reg, subject: SubjectOrGlobal) -> Response:
        return RegistryJSON(registry.delete_mode(subject))


def _compatibility_routes(app: FastAPI) -> None:
    @app.post(
        "/compatibility/subjects/{subject}/versions/{version}",
        summary="Test a schema against one version",
        response_model=models.CompatibilityAnswer,
        tags=["compatibility"],
    )
    def check_version(
        registry: Reg,
        subject: Subject,
        version: str,
        body: models.SchemaRequest,
        normalize: Flag = False,
        verbose: Flag = False,
    ) -> Response:
        result = registry.test_compatibility(subject, version, _input(body), normalize, verbose)
        return RegistryJSON(result)

    @app.post(
        "/compatibility/subjects/{subject}/versions",
        summary="Test a schema against the versions the subject's level names",
        response_model=models.CompatibilityAnswer,
        tags=["compatibility"],
    )
    def check_all(
        registry: Reg,
        subject: Subject,
        body: models.SchemaRequest,
        normalize: Flag = False,
        verbose: Flag = False,
    ) -> Response:
        result = registry.test_compatibility(subject, None, _input(body), normalize, verbose)
        return RegistryJSON(result)
