"""Health routes: ``GET /healthz`` (the process serves), ``GET /readyz`` (its dependencies do)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from starlette.responses import Response

from headwater import __version__
from headwater_kernel.body import JSONBody

ReadyCheck = Callable[[], Awaitable[tuple[bool, dict[str, Any]]]]
"""A service's readiness: whether it can serve, and details to show (``{"topics": 3}``)."""


def add_health_routes(
    app: FastAPI, ready: ReadyCheck | None = None, *, service: str | None = None
) -> None:
    """``GET /healthz`` always answers 200; ``GET /readyz`` answers 503 while ``ready`` says no.

    ``/healthz`` also says which service answers (``service``, default the app's title), its
    version and its process id: a client can tell a broker from a registry behind a URL, and a
    process that started a service can tell its own child from another process on the port.
    """
    name = service or app.title

    @app.get("/healthz", tags=["health"], summary="Liveness: the process is serving")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "service": name, "version": __version__, "pid": os.getpid()}

    readiness = {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["ready", "not ready"]}},
        "required": ["status"],
        "additionalProperties": True,  # one entry per dependency, as ``ready`` reports it
    }

    @app.get(
        "/readyz",
        tags=["health"],
        summary="Readiness: storage and dependencies answer",
        responses={
            200: {
                "description": "Ready",
                "content": {"application/json": {"schema": readiness}},
            },
            503: {
                "description": "Not ready: a dependency does not answer",
                "content": {"application/json": {"schema": readiness}},
            },
        },
    )
    async def readyz() -> Response:
        ok, detail = (True, {}) if ready is None else await ready()
        body = {"status": "ready" if ok else "not ready", **detail}
        return JSONBody(body, status_code=200 if ok else 503)
