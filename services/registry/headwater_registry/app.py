"""The registry's HTTP API: Confluent Schema Registry's routes, each calling one domain method."""

# No `from __future__ import annotations`: the config and mode routes are built per scope in a
# function, and FastAPI must see their local Annotated dependency types at definition time.

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Protocol, TypeVar

import anyio.to_thread
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.routing import APIRoute
from sqlalchemy.exc import SQLAlchemyError
from starlette.convertors import Convertor, register_url_convertor
from starlette.responses import Response

from headwater.registry.errors import RegistryError, UnprocessableEntityError
from headwater_kernel.app import create_service_app
from headwater_kernel.body import JSONBody
from headwater_kernel.errors import error_response
from headwater_registry import models
from headwater_registry.registry import Registry, SchemaInput
from headwater_registry.routing import SLASH, RegistryRouting
from headwater_registry.settings import RegistrySettings
from headwater_registry.store import SQLStore

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
log = logging.getLogger("headwater.registry")
T = TypeVar("T")


class RegistryJSON(JSONBody):
    media_type = MEDIA_TYPE


# Dependencies are ``async def`` because FastAPI runs plain ``def`` ones in its thread pool, which
# would cost a thread hop even on the cached, never-blocking id read.
async def _subject(subject: Annotated[str, Path(description="subject name; '/' as %2F")]) -> str:
    return subject.replace(SLASH, "/")


class Runner(Protocol):
    """How a route calls the synchronous domain core."""

    def __call__(self, fn: Callable[..., T], /, *args: Any) -> Awaitable[T]: ...


async def inline(fn: Callable[..., T], /, *args: Any) -> T:
    return fn(*args)


async def threaded(fn: Callable[..., T], /, *args: Any) -> T:
    return await anyio.to_thread.run_sync(fn, *args)


def runner_for(database_url: str) -> Runner:
    """SQLite calls run on the event loop; PostgreSQL calls in the thread pool.

    A SQLite query is a local file read of microseconds, and this process's writers are queued
    anyway, so handing each call to a worker thread and back (two thread wake-ups, milliseconds
    on a busy machine) costs more than it saves. PostgreSQL calls wait on the network, so they
    leave the loop free for other requests.
    """
    return inline if database_url.startswith("sqlite") else threaded


class RegistryApi:
    """What a route needs: the domain core and how to call it (one dependency, resolved cheaply)."""

    def __init__(self, run: Runner) -> None:
        self.run = run
        self.registry: Registry

    def do(self, method: Callable[..., T], /, *args: Any) -> Awaitable[T]:
        """Call ``Registry.<method>`` on this app's registry with ``args``."""
        return self.run(method, self.registry, *args)


async def _api(request: Request) -> RegistryApi:
    api: RegistryApi = request.app.state.api
    return api


class SubjectConvertor(Convertor[str]):
    """``{subject:subject}``: one path segment, with the ``%2F`` stand-in turned back into ``/``."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return value.replace(SLASH, "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", SLASH)


Api = Annotated[RegistryApi, Depends(_api)]
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
        app.state.api.registry = app.state.registry
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
        lifespan=lifespan,
        ready=ready,
        media_type=MEDIA_TYPE,
        validation_error=UnprocessableEntityError,
    )
    app.add_middleware(RegistryRouting, media_type=MEDIA_TYPE)
    app.state.api = RegistryApi(runner_for(settings.database_url))
    register_url_convertor("subject", SubjectConvertor())

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
    _document_errors(app)
    return app


def _document_errors(app: FastAPI) -> None:
    """Declare the error body on every registry route, so OpenAPI shows what clients get."""
    errors: dict[int | str, dict[str, Any]] = {
        status: {"model": models.ErrorBody, "description": description}
        for status, description in (
            (404, "40401 subject, 40402 version, 40403 schema not found; 40404-40409"),
            (409, "40901 incompatible schema"),
            (422, "422 bad body; 42201-42211"),
            (500, "50001 store error, 50002 timeout"),
        )
    }
    for route in app.routes:
        if isinstance(route, APIRoute) and route.tags and route.tags[0] != "health":
            route.responses = {**errors, **route.responses}


def _subject_routes(app: FastAPI) -> None:
    @app.get("/subjects", summary="List subjects", response_model=list[str], tags=["subjects"])
    async def list_subjects(
        api: Api,
        subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
        deleted: Flag = False,
        deletedOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        deleted_only: Flag = False,
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        only = deletedOnly or deleted_only
        return RegistryJSON(
            await api.do(Registry.list_subjects, subjectPrefix, deleted, only, offset, limit)
        )

    @app.post(
        "/subjects/{subject:subject}",
        summary="Look up a schema under a subject",
        response_model=models.SubjectVersion,
        tags=["subjects"],
    )
    async def lookup(
        api: Api,
        subject: str,
        body: models.SchemaRequest,
        normalize: Flag = False,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(
            await api.do(Registry.lookup, subject, _input(body), normalize, deleted)
        )

    @app.delete(
        "/subjects/{subject:subject}",
        summary="Delete a subject (soft; permanent=true after a soft delete)",
        response_model=list[int],
        tags=["subjects"],
    )
    async def delete_subject(api: Api, subject: str, permanent: Flag = False) -> Response:
        return RegistryJSON(await api.do(Registry.delete_subject, subject, permanent))

    @app.get(
        "/subjects/{subject:subject}/versions",
        summary="List a subject's versions",
        response_model=list[int],
        tags=["subjects"],
    )
    async def list_versions(
        api: Api,
        subject: str,
        deleted: Flag = False,
        deletedOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        deleted_only: Flag = False,
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        only = deletedOnly or deleted_only
        return RegistryJSON(
            await api.do(Registry.list_versions, subject, deleted, only, offset, limit)
        )

    @app.post(
        "/subjects/{subject:subject}/versions",
        summary="Register a schema under a subject",
        response_model=models.RegisteredId,
        tags=["subjects"],
    )
    async def register(
        api: Api,
        subject: str,
        body: models.SchemaRequest,
        normalize: Flag = False,
    ) -> Response:
        schema_id = await api.do(
            Registry.register, subject, _input(body), normalize, body.id, body.version
        )
        return RegistryJSON({"id": schema_id})

    @app.get(
        "/subjects/{subject:subject}/versions/{version}",
        summary="Get a version ('latest' or -1 for the newest)",
        response_model=models.SubjectVersion,
        tags=["subjects"],
    )
    async def get_version(api: Api, subject: str, version: str, deleted: Flag = False) -> Response:
        return RegistryJSON(await api.do(Registry.get_version, subject, version, deleted))

    @app.get(
        "/subjects/{subject:subject}/versions/{version}/schema",
        summary="Get only the schema of a version",
        response_model=Any,
        tags=["subjects"],
    )
    async def get_version_schema(
        api: Api, subject: str, version: str, deleted: Flag = False
    ) -> Response:
        return RegistryJSON(await api.do(Registry.get_version_schema, subject, version, deleted))

    @app.get(
        "/subjects/{subject:subject}/versions/{version}/referencedby",
        summary="Ids of schemas that reference this version",
        response_model=list[int],
        tags=["subjects"],
    )
    async def referenced_by(api: Api, subject: str, version: str) -> Response:
        return RegistryJSON(await api.do(Registry.referenced_by, subject, version))

    @app.delete(
        "/subjects/{subject:subject}/versions/{version}",
        summary="Delete a version (soft; permanent=true after a soft delete)",
        response_model=int,
        tags=["subjects"],
    )
    async def delete_version(
        api: Api, subject: str, version: str, permanent: Flag = False
    ) -> Response:
        return RegistryJSON(await api.do(Registry.delete_version, subject, version, permanent))


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
        api: Api,
        id: int,
        subject: str | None = None,
    ) -> Response:
        body = await api.registry.schema_body(id)
        return Response(body, media_type=MEDIA_TYPE)

    @app.get(
        "/schemas/ids/{id}/schema",
        summary="Get only the schema by global id",
        response_model=Any,
        tags=["schemas"],
    )
    async def schema_text(api: Api, id: int) -> Response:
        body = await api.registry.schema_body(id, text_only=True)
        return Response(body, media_type=MEDIA_TYPE)

    @app.get(
        "/schemas/ids/{id}/subjects",
        summary="Subjects that use a schema id",
        response_model=list[str],
        tags=["schemas"],
    )
    async def schema_subjects(
        api: Api,
        id: int,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(await api.do(Registry.schema_subjects, id, deleted))

    @app.get(
        "/schemas/ids/{id}/versions",
        summary="Subject versions that use a schema id",
        response_model=list[models.SubjectVersionPair],
        tags=["schemas"],
    )
    async def schema_versions(
        api: Api,
        id: int,
        deleted: Flag = False,
    ) -> Response:
        return RegistryJSON(await api.do(Registry.schema_versions, id, deleted))

    @app.get(
        "/schemas",
        summary="List schemas (subject versions)",
        response_model=list[models.SubjectVersion],
        tags=["schemas"],
    )
    async def list_schemas(
        api: Api,
        subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
        deleted: Flag = False,
        latestOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
        offset: Offset = 0,
        limit: Limit = -1,
    ) -> Response:
        return RegistryJSON(
            await api.do(Registry.list_schemas, subjectPrefix, deleted, latestOnly, offset, limit)
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
    async def contexts(api: Api) -> Response:
        return RegistryJSON(await api.do(Registry.contexts))


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
    async def get_config(
        api: Api,
        subject: SubjectOrGlobal,
        defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
    ) -> Response:
        return RegistryJSON(await api.do(Registry.get_config, subject, defaultToGlobal))

    @app.put(
        path,
        summary=f"Set {what} compatibility level",
        response_model=models.ConfigUpdated,
        tags=["config"],
    )
    async def put_config(
        api: Api, subject: SubjectOrGlobal, body: models.ConfigRequest
    ) -> Response:
        return RegistryJSON(
            await api.do(Registry.put_config, subject, body.compatibility, body.normalize)
        )

    @app.delete(
        path,
        summary=f"Delete {what} compatibility level",
        response_model=models.ConfigAnswer,
        tags=["config"],
    )
    async def delete_config(api: Api, subject: SubjectOrGlobal) -> Response:
        return RegistryJSON(await api.do(Registry.delete_config, subject))


def _mode_routes(app: FastAPI) -> None:
    for path, scoped in (("/mode", False), ("/mode/{subject}", True)):
        _mode_route_set(app, path, scoped)


def _mode_route_set(app: FastAPI, path: str, scoped: bool) -> None:
    what = "a subject's" if scoped else "the global"

    async def no_subject() -> None:
        return None

    SubjectOrGlobal = Annotated[str | None, Depends(_subject if scoped else no_subject)]  # noqa: N806

    @app.get(path, summary=f"Get {what} mode", response_model=models.ModeAnswer, tags=["mode"])
    async def get_mode(
        api: Api,
        subject: SubjectOrGlobal,
        defaultToGlobal: Flag = False,  # noqa: N803 -- Confluent's parameter name
    ) -> Response:
        return RegistryJSON(await api.do(Registry.get_mode, subject, defaultToGlobal))

    @app.put(path, summary=f"Set {what} mode", response_model=models.ModeAnswer, tags=["mode"])
    async def put_mode(
        api: Api,
        subject: SubjectOrGlobal,
        body: models.ModeRequest,
        force: Flag = False,
    ) -> Response:
        return RegistryJSON(await api.do(Registry.put_mode, subject, body.mode, force))

    @app.delete(
        path, summary=f"Delete {what} mode", response_model=models.ModeAnswer, tags=["mode"]
    )
    async def delete_mode(api: Api, subject: SubjectOrGlobal) -> Response:
        return RegistryJSON(await api.do(Registry.delete_mode, subject))


def _compatibility_routes(app: FastAPI) -> None:
    @app.post(
        "/compatibility/subjects/{subject:subject}/versions/{version}",
        summary="Test a schema against one version",
        response_model=models.CompatibilityAnswer,
        tags=["compatibility"],
    )
    async def check_version(
        api: Api,
        subject: str,
        version: str,
        body: models.SchemaRequest,
        normalize: Flag = False,
        verbose: Flag = False,
    ) -> Response:
        result = await api.do(
            Registry.test_compatibility, subject, version, _input(body), normalize, verbose
        )
        return RegistryJSON(result)

    @app.post(
        "/compatibility/subjects/{subject:subject}/versions",
        summary="Test a schema against the versions the subject's level names",
        response_model=models.CompatibilityAnswer,
        tags=["compatibility"],
    )
    async def check_all(
        api: Api,
        subject: str,
        body: models.SchemaRequest,
        normalize: Flag = False,
        verbose: Flag = False,
    ) -> Response:
        result = await api.do(
            Registry.test_compatibility, subject, None, _input(body), normalize, verbose
        )
        return RegistryJSON(result)
