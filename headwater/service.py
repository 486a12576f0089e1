"""Plumbing every Headwater service shares: settings base, error mapping, health routes, serving.

This is the one module of ``headwater/`` that knows FastAPI; a service's domain core never imports
it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from headwater.errors import (
    ErrorFamily,
    HeadwaterError,
    InvalidRequestError,
    MalformedRequestError,
    UnknownServerError,
)

log = logging.getLogger("headwater.service")


class ServiceSettings(BaseSettings):
    """Settings every service has; subclasses set ``env_prefix`` (``BROKER_``, ``REGISTRY_``)."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    log_level: str = "info"


class JSONBody(Response):
    """A JSON response encoded with orjson (several times faster than the stdlib for big bodies)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: HeadwaterError, media_type: str = "application/json") -> Response:
    return JSONBody(error.to_body(), status_code=error.http_status, media_type=media_type)


def install_error_handlers(
    app: FastAPI,
    family: ErrorFamily,
    *,
    media_type: str = "application/json",
    validation_error: Callable[[str], HeadwaterError] = InvalidRequestError,
) -> None:
    """Map every error to ``{"error_code", "message"}`` with its HTTP status.

    ``validation_error`` builds the error for a request FastAPI itself rejects (bad JSON body, a
    query parameter of the wrong type): a service picks the code its API documents for that.
    """

    async def on_headwater_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HeadwaterError)
        return error_response(exc, media_type)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(
                MalformedRequestError("Malformed JSON in request body"), media_type
            )
        parts = []
        for e in errors[:5]:
            where = ".".join(str(p) for p in e.get("loc", ()))
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        return error_response(validation_error("; ".join(parts) or "Invalid request"), media_type)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        body = {"error_code": exc.status_code, "message": str(exc.detail)}
        return JSONBody(body, status_code=exc.status_code, media_type=media_type)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(
            UnknownServerError(f"Internal error: {type(exc).__name__}"), media_type
        )

    app.add_exception_handler(HeadwaterError, on_headwater_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
    app.state.error_family = family


def add_health_routes(
    app: FastAPI, ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]] | None = None
) -> None:
    """``GET /healthz`` (the process serves) and ``GET /readyz`` (its dependencies answer)."""

    @app.get("/healthz", tags=["health"], summary="Liveness: the process is serving")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: storage and dependencies answer")
    async def readyz() -> Response:
        ok, detail = (True, {}) if ready is None else await ready()
        body = {"status": "ready" if ok else "not ready", **detail}
        return JSONBody(body, status_code=200 if ok else 503)


def create_service_app(
    *,
    title: str,
    description: str,
    family: ErrorFamily,
    lifespan: Any = None,
    ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]] | None = None,
    media_type: str = "application/json",
    validation_error: Callable[[str], HeadwaterError] = InvalidRequestError,
) -> FastAPI:
    """The FastAPI app every service starts from: error mapping and health routes installed.

    Cross-cutting concerns (request ids, structured logs, ``/metrics``) are added here, once, for
    every service.
    """
    from headwater import __version__

    app = FastAPI(
        title=title,
        description=description,
        version=__version__,
        lifespan=lifespan,
        default_response_class=JSONBody,
    )
    install_error_handlers(app, family, media_type=media_type, validation_error=validation_error)
    add_health_routes(app, ready)
    return app


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run an app in the foreground with uvicorn until SIGINT/SIGTERM."""
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
