"""What every service reports about the requests it serves: request ids, metrics, access lines.

:class:`RequestTelemetry` gives every response an ``X-Request-ID``, sets the id for log lines
(:data:`headwater_kernel.logs.request_id`), counts requests and latencies per route template
(:mod:`headwater_kernel.metrics`) and writes a debug access line; :func:`add_metrics_route`
serves ``GET /metrics``.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import MutableMapping
from typing import Any

from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from headwater_kernel import logs
from headwater_kernel.metrics import UNMATCHED_ROUTE, HTTPRequestRecorder, exposition

access_log = logging.getLogger("headwater.access")

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_KEY = REQUEST_ID_HEADER.lower().encode()
# An incoming id is honoured only if it is 1..128 printable ASCII characters without spaces, so a
# client cannot inject line breaks or unbounded text into logs and response headers.
_VALID_REQUEST_ID = re.compile(rb"[\x21-\x7e]{1,128}")


class RequestTelemetry:
    """Pure ASGI middleware: request id, per-route HTTP metrics and a debug access log line.

    It wraps the whole app outside Starlette's ServerErrorMiddleware (see
    :class:`headwater_kernel.app.ServiceApp`), so even an unhandled error's 500 response carries
    the request id and is counted. It is not a ``BaseHTTPMiddleware``: that one runs the endpoint
    in a separate task and streams the body through a memory channel, which costs the broker's
    hot path far more than this wrapper's one header scan, one timer and one cached counter
    increment.
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
