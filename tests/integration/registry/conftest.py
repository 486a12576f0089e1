"""The registry app under test, over a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from headwater_registry.app import create_app
from headwater_registry.settings import RegistrySettings


@pytest.fixture(params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with TestClient(create_app(RegistrySettings(database_url=url))) as client:
        yield client
