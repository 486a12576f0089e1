"""GET /healthz answers while the process serves; GET /readyz follows the service's own check."""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from headwater import __version__
from headwater_kernel.health import add_health_routes


def test_without_a_check_the_service_is_live_and_ready() -> None:
    app = FastAPI(title="tiny")
    add_health_routes(app)
    client = TestClient(app)
    assert client.get("/healthz").json() == {
        "status": "ok",
        "service": "tiny",
        "version": __version__,
        "pid": os.getpid(),
    }
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}


def test_readiness_follows_the_check_and_shows_its_details() -> None:
    state = {"ok": False}

    async def ready() -> tuple[bool, dict[str, Any]]:
        return state["ok"], {"database": "up" if state["ok"] else "down"}

    app = FastAPI()
    add_health_routes(app, ready)
    client = TestClient(app)
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503
    assert not_ready.json() == {"status": "not ready", "database": "down"}
    assert client.get("/healthz").status_code == 200  # live while not ready: no restart
    state["ok"] = True
    ready_now = client.get("/readyz")
    assert ready_now.status_code == 200
    assert ready_now.json() == {"status": "ready", "database": "up"}


def test_healthz_names_the_service_it_is_given() -> None:
    app = FastAPI(title="Headwater broker")
    add_health_routes(app, service="broker")
    assert TestClient(app).get("/healthz").json()["service"] == "broker"
