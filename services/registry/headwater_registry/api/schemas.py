"""Schema routes: schemas by global id (the reads every deserializer makes), listings, types.

``GET /schemas/ids/{id}`` and ``.../schema`` are most of a registry's traffic, so their routes
are :class:`PrerenderedRoute` and live on their own router, which ``app.py`` puts first.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from headwater.types import SchemaId
from headwater_registry.api import models
from headwater_registry.api.deps import Flag, Limit, Offset, RegistryDep
from headwater_registry.api.media import MEDIA_TYPE, RegistryJSON
from headwater_registry.registry import Registry
from headwater_registry.subjects import Page

_CONTENT_TYPE = (b"content-type", MEDIA_TYPE.encode())


class PrerenderedRoute(APIRoute):
    """A read by id that the core may hold as rendered bytes: then they are the answer.

    The bytes are sent as soon as the route matches, skipping FastAPI's request handling (request
    object, parameter parsing, dependency solving, response wrapping), which costs several times
    the rest of a cached read. Anything else -- a method other than GET, an id that is not a
    number, an id this process has not rendered yet -- goes to the endpoint like any route.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw: str = scope["path_params"].get("id", "")
        # The same ids the endpoint's ``id: int`` accepts, bounded so int() stays cheap.
        if scope["method"] == "GET" and raw.isascii() and raw.isdigit() and len(raw) < 11:
            registry: Registry = scope["app"].state.registry
            text_only = self.path_format.endswith("/schema")
            body = registry.prerendered_schema(SchemaId(int(raw)), text_only=text_only)
            if body is not None:
                headers = [_CONTENT_TYPE, (b"content-length", b"%d" % len(body))]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await super().handle(scope, receive, send)


by_id = APIRouter(tags=["schemas"], responses=models.ERROR_RESPONSES, route_class=PrerenderedRoute)


@by_id.get(
    "/schemas/ids/{id}", summary="Get a schema by global id", response_model=models.SchemaById
)
async def schema_by_id(registry: RegistryDep, id: int, subject: str | None = None) -> Response:
    body = await registry.schema_body(SchemaId(id), text_only=False)
    return Response(body, media_type=MEDIA_TYPE)


@by_id.get(
    "/schemas/ids/{id}/schema", summary="Get only the schema by global id", response_model=Any
)
async def schema_text(registry: RegistryDep, id: int) -> Response:
    body = await registry.schema_body(SchemaId(id), text_only=True)
    return Response(body, media_type=MEDIA_TYPE)


router = APIRouter(tags=["schemas"], responses=models.ERROR_RESPONSES)


@router.get(
    "/schemas/ids/{id}/subjects",
    summary="Subjects that use a schema id",
    response_model=list[str],
)
async def schema_subjects(registry: RegistryDep, id: int, deleted: Flag = False) -> Response:
    return RegistryJSON(await registry.schema_subjects(SchemaId(id), deleted=deleted))


@router.get(
    "/schemas/ids/{id}/versions",
    summary="Subject versions that use a schema id",
    response_model=list[models.SubjectVersionPair],
)
async def schema_versions(registry: RegistryDep, id: int, deleted: Flag = False) -> Response:
    return RegistryJSON(await registry.schema_versions(SchemaId(id), deleted=deleted))


@router.get(
    "/schemas",
    summary="List schemas (subject versions)",
    response_model=list[models.SubjectVersion],
)
async def list_schemas(
    registry: RegistryDep,
    subjectPrefix: str = "",  # noqa: N803 -- Confluent's parameter name
    deleted: Flag = False,
    latestOnly: Flag = False,  # noqa: N803 -- Confluent's parameter name
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    schemas = await registry.list_schemas(
        subjectPrefix, Page(offset, limit), deleted=deleted, latest_only=latestOnly
    )
    return RegistryJSON(schemas)


@router.get("/schemas/types", summary="Supported schema types", response_model=list[str])
async def schema_types() -> Response:
    return RegistryJSON(Registry.schema_types())
