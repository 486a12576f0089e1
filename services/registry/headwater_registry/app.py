"""``create_app(settings)``: the registry's FastAPI app over a :class:`Registry` on its database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from headwater.registry.errors import UnprocessableEntityError
from headwater_kernel import openapi
from headwater_kernel.app import create_service_app
from headwater_registry.api import compatibility, config, contexts, mode, schemas, subjects
from headwater_registry.api.media import MEDIA_TYPE
from headwater_registry.api.rewrite import RequestRewrite
from headwater_registry.registry import Registry
from headwater_registry.settings import RegistrySettings
from headwater_registry.store.database import SQLStore

_DESCRIPTION = "Confluent Schema Registry REST API for Avro schemas, over SQLite or PostgreSQL."
ROUTERS = (
    subjects.router,
    contexts.router,
    schemas.router,
    config.router,
    mode.router,
    compatibility.router,
)
"""Every router but ``schemas.by_id``, in the order their routes are tried."""


def create_app(settings: RegistrySettings) -> FastAPI:
    """The registry app over the database at ``settings.database_url`` (migrated at start)."""
    store = SQLStore(settings.database_url, settings.write_attempts)
    registry = Registry(store, settings.default_compatibility)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        registry.open()
        try:
            yield
        finally:
            registry.close()

    app = create_service_app(
        title="Headwater schema registry",
        description=_DESCRIPTION,
        lifespan=lifespan,
        ready=registry.ready,
        media_type=MEDIA_TYPE,
        validation_error=UnprocessableEntityError,
    )
    app.state.registry = registry
    app.add_middleware(RequestRewrite)
    # The routes go straight into the app's list rather than through include_router, whose
    # included router matches its routes once to be chosen and again to dispatch; the reads by
    # id go first, before even the health routes: every deserializer makes them, and each route
    # tried before the right one costs about a microsecond.
    app.router.routes[:0] = schemas.by_id.routes
    for router in ROUTERS:
        app.router.routes.extend(router.routes)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document without the 422 it adds to every route with parameters.

    That 422 shows pydantic's error list, which no route sends: a route that can answer 422
    documents it with the registry's error body (``models.errors``), and one whose parameters
    cannot fail (an id or a version is read by the core, answering 40403 or 42202) sends none.
    """
    if app.openapi_schema is not None:
        return app.openapi_schema
    return openapi.drop_validation_errors(FastAPI.openapi(app))  # keeps app.openapi_schema
