"""Fixtures of the coordinator's integration tests: the store driver and the in-process app."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from tests.integration.coordinator.driver import StoreDriver
from tests.support import ServiceProcess


@pytest.fixture
def driver(redis_prefix: str) -> Iterator[StoreDriver]:
    d = StoreDriver(redis_prefix)
    yield d
    d.close()


@pytest.fixture
def api(broker: ServiceProcess, redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    """The coordinator app in-process on real Redis, over the module's broker process."""
    settings = CoordinatorSettings(
        redis_url=redis_url,
        key_prefix=redis_prefix,
        brokers=broker.url,
        heartbeat_interval_ms=500,
        session_timeout_ms=1000,
        sweep_interval_ms=100,
    )
    with TestClient(create_app(settings)) as client:
        yield client
