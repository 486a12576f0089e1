"""Plumbing every Headwater service shares: settings base, error mapping, health routes, serving.

A service's domain core never imports this module. It also wires in what every service gets
without asking: ``GET /metrics`` (Prometheus text, :mod:`headwater_kernel.metrics`), per-route
request counts and latencies, an ``X-Request-ID`` on every response, and JSON log lines carrying
that id (:mod:`headwater_kernel.logs`).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.errors import (
    ErrorFamily,
    HeadwaterError,
    InvalidRequestError,
    MalformedRequestError,
    UnknownServerError,
)
from headwater_kernel import logs
from headwater_kernel.metrics import UNMATCHED_ROUTE, HTTPRequestRecorder, exposition

log = logging.getLogger("headwater_kernel.service")
access_log = logging.getLogger("headwater.access")

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_KEY = REQUEST_ID_HEADER.lower().encode()
# An incoming id is honoured only if it is 1..128 printable ASCII characters without spaces, so a
# client cannot inject line breaks or unbounded text into logs and response headers.
_VALID_REQUEST_ID = re.compile(rb"[\x21-\x7e]{1,128}")


class ServiceSettings(BaseSettings):
    """Settings every service has; subclasses set ``env_prefix`` (``BROKER_``, ``REGISTRY_``)."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    log_level: str = "info"


class JSONBody(JSONResponse):
    """JSON encoded with orjson (several times faster than the stdlib for big bodies).

    A ``JSONResponse``, so FastAPI still documents each route's response model in OpenAPI.
    """

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


class RequestTelemetry:
    """Pure ASGI middleware: request id, per-route HTTP metrics and a debug access log line.

    It wraps the whole app outside Starlette's ServerErrorMiddleware (see :class:`_ServiceApp`),
    so even an unhandled error's 500 response carries the request id and is counted. It is not a
    ``BaseHTTPMiddleware``: that one runs the endpoint in a separate task and streams the body
    through a memory channel, which costs the broker's hot path far more than this wrapper's one
    header scan, one timer and one cached counter increment.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.recorder = HTTPRequestRecorder()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid_bytes: bytes | None = None
        for name, value in scope["headers"]:
            if name == _REQUEST_ID_KEY:
                if _VALID_REQUEST_ID.fullmatch(value):
                    rid_bytes = value
                break
        if rid_bytes is None:
            # Ids only need to be unique, not secret: the PRNG avoids a getrandom() system call.
            rid_bytes = b"%016x" % random.getrandbits(64)
        rid = rid_bytes.decode("ascii")
        # Starlette's request.state reads scope["state"]: routes see request.state.request_id.
        scope.setdefault("state", {})["request_id"] = rid
        token = logs.request_id.set(rid)
        status = 500  # what the client gets if the app fails before starting a response
        start = time.perf_counter()

        async def send_with_id(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (_REQUEST_ID_KEY, rid_bytes)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            # FastAPI's router leaves the matched route in the (shared, mutated) scope.
            route = scope.get("route")
            template = getattr(route, "path_format", None) or UNMATCHED_ROUTE
            self.recorder.record(scope["method"], template, status, elapsed)
            if access_log.isEnabledFor(logging.DEBUG):
                access_log.debug(
                    "request",
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": template,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                    },
                )
            logs.request_id.reset(token)


class _ServiceApp(FastAPI):
    """A FastAPI app whose outermost layer is :class:`RequestTelemetry`.

    ``add_middleware`` would place it inside ServerErrorMiddleware, where an unhandled error's
    500 response bypasses it; wrapping the built stack keeps ids and metrics on every response.
    """

    def build_middleware_stack(self) -> ASGIApp:
        return RequestTelemetry(super().build_middleware_stack())


def add_metrics_route(app: FastAPI) -> None:
    """``GET /metrics``: the process's Prometheus metrics (default registry) in text format."""

    @app.get(
        "/metrics",
        tags=["observability"],
        summary="Prometheus metrics of this process (text exposition format)",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text"}},
    )
    async def metrics() -> Response:
        body, content_type = exposition()
        return Response(body, media_type=content_type)


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

    app = _ServiceApp(
        title=title,
        description=description,
        version=__version__,
        lifespan=lifespan,
        default_response_class=JSONBody,
    )
    install_error_handlers(app, family, media_type=media_type, validation_error=validation_error)
    add_health_routes(app, ready)
    add_metrics_route(app)
    return app


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run an app in the foreground with uvicorn until SIGINT/SIGTERM, logging JSON lines."""
    prefix = str(settings.model_config.get("env_prefix") or "")
    logs.configure(settings.log_level, service=prefix.rstrip("_").lower() or app.title)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # None keeps the JSON handler configured above: uvicorn's loggers propagate to it.
        log_config=None,
        # RequestTelemetry writes the access line (with request id) at debug level.
        access_log=False,
        timeout_graceful_shutdown=5,
    )
