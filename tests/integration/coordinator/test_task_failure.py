"""A background loop of the coordinator that dies makes it not ready, naming the loop."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from headwater_coordinator.app import create_app
from headwater_coordinator.coordinator import Coordinator
from headwater_coordinator.settings import CoordinatorSettings
from tests.support import ServiceProcess
from tests.support.waiting import wait_until


class SweepBugError(RuntimeError):
    pass


async def dying_sweeper(self: Coordinator) -> None:
    raise SweepBugError("a bug the sweeper did not survive")


def test_a_dead_sweeper_makes_the_coordinator_not_ready(
    monkeypatch: pytest.MonkeyPatch, broker: ServiceProcess, redis_url: str, redis_prefix: str
) -> None:
    monkeypatch.setattr(Coordinator, "run_sweeper", dying_sweeper)
    settings = CoordinatorSettings(redis_url=redis_url, key_prefix=redis_prefix, brokers=broker.url)
    with TestClient(create_app(settings)) as api:
        wait_until(lambda: api.get("/readyz").status_code == 503, 5, "not ready")
        answer = api.get("/readyz")
        assert answer.json()["failed_tasks"] == {
            "coordinator-sweeper": "SweepBugError: a bug the sweeper did not survive"
        }
        assert answer.json()["redis"] == "ok"  # Redis is fine: the loop is what is missing
        assert api.get("/healthz").status_code == 200  # alive, so not restarted for nothing
