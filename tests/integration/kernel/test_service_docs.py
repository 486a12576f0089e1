"""Every service's /docs and /redoc, and the assets they load, are served by the service itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from headwater_broker.app import create_app as broker_app
from headwater_broker.settings import BrokerSettings
from headwater_coordinator.app import create_app as coordinator_app
from headwater_coordinator.settings import CoordinatorSettings
from headwater_kernel.api_docs import ASSETS
from headwater_registry.app import create_app as registry_app
from headwater_registry.settings import RegistrySettings


def apps(tmp_path: Path, redis_url: str, redis_prefix: str) -> dict[str, FastAPI]:
    return {
        "broker": broker_app(BrokerSettings(data_dir=str(tmp_path / "broker"))),
        "schema registry": registry_app(
            RegistrySettings(database_url=f"sqlite:///{tmp_path / 'registry.db'}")
        ),
        "coordinator": coordinator_app(
            CoordinatorSettings(redis_url=redis_url, key_prefix=redis_prefix)
        ),
    }


@pytest.mark.parametrize("service", ["broker", "schema registry", "coordinator"])
def test_docs_work_without_internet(
    service: str, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    app = apps(tmp_path, redis_url, redis_prefix)[service]
    with TestClient(app) as client:
        assert client.get("/healthz").json()["service"] == service
        docs = client.get("/docs")
        assert docs.status_code == 200
        assert f"Headwater {service} - Swagger UI" in docs.text
        assert "https://" not in docs.text
        assert "https://" not in client.get("/redoc").text
        for name in ASSETS:
            assert f"/docs/assets/{name}" in docs.text + client.get("/redoc").text
            assert client.get(f"/docs/assets/{name}").status_code == 200, name
        spec = client.get("/openapi.json").json()
        assert spec["info"]["title"] == f"Headwater {service}"
        assert "/docs" not in spec["paths"]  # the docs pages are not part of the API
