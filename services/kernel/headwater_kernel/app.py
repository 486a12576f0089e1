"""``create_service_app``: the FastAPI app every service starts from, cross-cutting parts wired in.

Every app gets, without code of its own: error mapping (:mod:`headwater_kernel.errors`),
``/healthz`` and ``/readyz`` (:mod:`headwater_kernel.health`), ``GET /metrics``, per-route request
counts and latencies, an ``X-Request-ID`` on every response and log lines carrying that id
(:mod:`headwater_kernel.telemetry`), and API docs at ``/docs`` and ``/redoc`` that need no
internet (:mod:`headwater_kernel.api_docs`). A service's domain core never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from headwater import __version__
from headwater.errors import HeadwaterError, InvalidRequestError
from headwater_kernel.api_docs import add_docs_routes
from headwater_kernel.body import JSONBody
from headwater_kernel.errors import install_error_handlers
from headwater_kernel.health import ReadyCheck, add_health_routes
from headwater_kernel.telemetry import RequestTelemetry, add_metrics_route


class ServiceApp(FastAPI):
    """A FastAPI app whose outermost layer is :class:`RequestTelemetry`.

    ``add_middleware`` would place it inside ServerErrorMiddleware, where an unhandled error's
    500 response bypasses it; wrapping the built stack keeps ids and metrics on every response.
    """

    def build_middleware_stack(self) -> ASGIApp:
        return RequestTelemetry(super().build_middleware_stack())


def create_service_app(
    *,
    title: str,
    description: str,
    lifespan: Any = None,
    ready: ReadyCheck | None = None,
    media_type: str = "application/json",
    validation_error: Callable[[str], HeadwaterError] = InvalidRequestError,
    service: str | None = None,
) -> FastAPI:
    """The FastAPI app every service starts from: error mapping and health routes installed.

    Cross-cutting concerns (request ids, structured logs, ``/metrics``, offline docs) are added
    here, once, for every service. ``service`` is the name ``/healthz`` answers with (default:
    the title without its leading "Headwater ", so "Headwater broker" answers "broker").
    """
    app = ServiceApp(
        title=title,
        description=description,
        version=__version__,
        lifespan=lifespan,
        default_response_class=JSONBody,
        docs_url=None,  # FastAPI's pages load their assets from a CDN; add_docs_routes does not
        redoc_url=None,
    )
    install_error_handlers(app, media_type=media_type, validation_error=validation_error)
    add_health_routes(app, ready, service=service or title.removeprefix("Headwater "))
    add_metrics_route(app)
    add_docs_routes(app)
    return app
