"""create_service_app: errors, health, metrics and telemetry wired into every service's app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from headwater import __version__
from headwater.errors import HeadwaterError, InvalidOffsetError, TopicNotFoundError
from headwater_kernel.app import create_service_app

REGISTRY_JSON = "application/vnd.schemaregistry.v1+json"


def test_the_app_is_described_with_the_package_version() -> None:
    app = create_service_app(title="app test", description="what it does")
    info = TestClient(app).get("/openapi.json").json()["info"]
    assert info == {"title": "app test", "description": "what it does", "version": __version__}


def test_metrics_and_health_are_in_the_openapi_document() -> None:
    app = create_service_app(title="app test", description="tiny app")
    paths = TestClient(app).get("/openapi.json").json()["paths"]
    assert paths["/metrics"]["get"]["summary"] == (
        "Prometheus metrics of this process (text exposition format)"
    )
    assert set(paths) == {"/metrics", "/healthz", "/readyz"}


def test_lifespan_and_readiness_are_the_services() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("open")
        yield
        events.append("close")

    async def ready() -> tuple[bool, dict[str, Any]]:
        return "open" in events and "close" not in events, {"events": len(events)}

    app = create_service_app(title="app test", description="x", lifespan=lifespan, ready=ready)
    with TestClient(app) as client:
        response = client.get("/readyz")
        assert response.status_code == 200
        assert response.json() == {"status": "ready", "events": 1}
    assert events == ["open", "close"]


def test_error_media_type_and_validation_error_are_the_services() -> None:
    def as_offset_error(message: str) -> HeadwaterError:
        return InvalidOffsetError(message)

    app = create_service_app(
        title="app test",
        description="x",
        media_type=REGISTRY_JSON,
        validation_error=as_offset_error,
    )

    @app.get("/app-items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        raise TopicNotFoundError(f"Topic '{item_id}' not found")

    client = TestClient(app)
    missing = client.get("/app-items/4")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == REGISTRY_JSON
    assert missing.json() == {"error_code": 40401, "message": "Topic '4' not found"}
    invalid = client.get("/app-items/four")
    assert invalid.status_code == 400
    assert invalid.headers["content-type"] == REGISTRY_JSON
    assert invalid.json()["error_code"] == 40004
