"""RequestTelemetry and /metrics: request ids, per-route HTTP metrics on a service app."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY, Counter

from headwater.errors import TopicNotFoundError
from headwater_kernel.app import create_service_app

# Route templates unique to this module: the default registry is process-wide, so every
# assertion below is a delta on series no other test touches.
ITEM_ROUTE = "/telemetry-items/{item_id}"

DOMAIN_COUNTER = Counter(
    "headwater_test_telemetry_domain_events", "A domain metric defined at module level."
)


def build_app() -> FastAPI:
    app = create_service_app(title="telemetry test", description="tiny app")
    log = logging.getLogger("tests.telemetry")

    @app.get(ITEM_ROUTE)
    async def item(item_id: int, request: Request) -> dict[str, object]:
        log.warning("serving item", extra={"item_id": item_id})
        return {"item_id": item_id, "request_id": request.state.request_id}

    @app.get("/telemetry-missing")
    async def missing() -> dict[str, str]:
        raise TopicNotFoundError("Topic 'x' not found")

    @app.get("/telemetry-boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("unexpected")

    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(build_app(), raise_server_exceptions=False) as client:
        yield client


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_generated_request_id_is_echoed_and_visible_to_the_route(client: TestClient) -> None:
    response = client.get("/telemetry-items/7")
    assert response.status_code == 200
    rid = response.headers["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{16}", rid)
    assert response.json() == {"item_id": 7, "request_id": rid}
    assert client.get("/telemetry-items/7").headers["X-Request-ID"] != rid


def test_incoming_request_id_is_honoured(client: TestClient) -> None:
    response = client.get("/telemetry-items/1", headers={"X-Request-ID": "trace-abc.123:9"})
    assert response.headers["X-Request-ID"] == "trace-abc.123:9"
    assert response.json()["request_id"] == "trace-abc.123:9"


@pytest.mark.parametrize("bad", ["has space", "x" * 129, ""])
def test_unsafe_incoming_request_id_is_replaced(client: TestClient, bad: str) -> None:
    response = client.get("/telemetry-items/1", headers={"X-Request-ID": bad})
    assert re.fullmatch(r"[0-9a-f]{16}", response.headers["X-Request-ID"])


def test_error_responses_carry_the_request_id(client: TestClient) -> None:
    handled = client.get("/telemetry-missing", headers={"X-Request-ID": "r-404"})
    assert handled.status_code == 404
    assert handled.json() == {"error_code": 40401, "message": "Topic 'x' not found"}
    assert handled.headers["X-Request-ID"] == "r-404"
    unhandled = client.get("/telemetry-boom", headers={"X-Request-ID": "r-500"})
    assert unhandled.status_code == 500
    assert unhandled.json() == {"error_code": 50000, "message": "Internal error: RuntimeError"}
    assert unhandled.headers["X-Request-ID"] == "r-500"


def test_requests_are_counted_per_route_template_and_status(client: TestClient) -> None:
    ok = {"method": "GET", "route": ITEM_ROUTE, "status": "200"}
    bad = {"method": "GET", "route": ITEM_ROUTE, "status": "422"}
    before_ok = sample("headwater_http_requests_total", **ok)
    before_bad = sample("headwater_http_requests_total", **bad)
    before_hist = sample(
        "headwater_http_request_duration_seconds_count", method="GET", route=ITEM_ROUTE
    )
    for item_id in (1, 2, 3):
        assert client.get(f"/telemetry-items/{item_id}").status_code == 200
    assert client.get("/telemetry-items/not-a-number").status_code == 422
    assert sample("headwater_http_requests_total", **ok) == before_ok + 3
    assert sample("headwater_http_requests_total", **bad) == before_bad + 1
    assert (
        sample("headwater_http_request_duration_seconds_count", method="GET", route=ITEM_ROUTE)
        == before_hist + 4
    )


def test_unmatched_paths_share_one_series_and_failures_are_counted(client: TestClient) -> None:
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    boom = {"method": "GET", "route": "/telemetry-boom", "status": "500"}
    before_unmatched = sample("headwater_http_requests_total", **unmatched)
    before_boom = sample("headwater_http_requests_total", **boom)
    assert client.get("/no/such/path/a").status_code == 404
    assert client.get("/no/such/path/b").status_code == 404
    assert client.get("/telemetry-boom").status_code == 500
    assert sample("headwater_http_requests_total", **unmatched) == before_unmatched + 2
    assert sample("headwater_http_requests_total", **boom) == before_boom + 1


def test_invented_methods_share_one_label(client: TestClient) -> None:
    labels = {"method": "OTHER", "route": "unmatched", "status": "404"}
    before = sample("headwater_http_requests_total", **labels)
    assert client.request("BREW", "/nowhere").status_code == 404
    assert sample("headwater_http_requests_total", **labels) == before + 1


def test_metrics_route_serves_prometheus_text_with_domain_metrics(client: TestClient) -> None:
    DOMAIN_COUNTER.inc(2)
    client.get("/telemetry-items/5")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert "# TYPE headwater_http_requests_total counter" in text
    assert "# TYPE headwater_http_request_duration_seconds histogram" in text
    assert f'route="{ITEM_ROUTE}",status="200"' in text
    total = REGISTRY.get_sample_value("headwater_test_telemetry_domain_events_total")
    assert f"headwater_test_telemetry_domain_events_total {total}" in text
    assert "process_cpu_seconds_total" in text
