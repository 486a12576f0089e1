"""``POST /replication/fetch`` through a broker app: served ahead of the REST routes, with the
answers, errors, request ids and per-route metrics of every other route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from headwater_broker.app import create_app
from headwater_broker.replication.fetcher import FETCH_PATH
from headwater_broker.replication.wire import (
    MEDIA_TYPE,
    FetchPartition,
    ReplicaFetchRequest,
    decode_response,
)
from headwater_broker.settings import BrokerSettings
from tests.support import unique

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def broker(data_dir: Path, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(BrokerSettings(data_dir=str(data_dir), **settings))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
            yield client


def fetch_count(metrics: str, status: str) -> float:
    labels = f'method="POST",route="{FETCH_PATH}",status="{status}"'
    prefix = f"headwater_http_requests_total{{{labels}}}"
    for line in metrics.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_fetch_is_answered_in_the_replica_fetch_format_with_a_request_id(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path) as client:
        topic = unique("t")
        created = await client.post("/topics", json={"name": topic, "partitions": 1})
        assert created.status_code == 201, created.text
        before = fetch_count((await client.get("/metrics")).text, "200")
        # Broker 7 is no replica of the partition: its entry is refused, the request is not.
        request = ReplicaFetchRequest(
            7, 1, [FetchPartition(topic, 0, leader_epoch=0, fetch_offset=0)], max_wait_ms=0
        )
        answer = await client.post(
            FETCH_PATH,
            content=request.to_json(),
            headers={"content-type": "application/json", "x-request-id": "fetch-1"},
        )
        assert answer.status_code == 200
        assert answer.headers["content-type"] == MEDIA_TYPE
        assert answer.headers["x-request-id"] == "fetch-1"
        (result,) = decode_response(answer.content)
        assert (result.topic, result.partition, result.error_code) == (topic, 0, 42101)
        assert result.records == b""
        after = fetch_count((await client.get("/metrics")).text, "200")
        assert after == before + 1


async def test_a_bad_or_too_large_body_is_answered_with_the_error_body(tmp_path: Path) -> None:
    async with broker(tmp_path, max_request_bytes=1000) as client:
        before = (await client.get("/metrics")).text
        answer = await client.post(FETCH_PATH, content=b"{not json")
        assert answer.status_code == 400
        assert answer.headers["content-type"] == "application/json"
        assert orjson.loads(answer.content)["error_code"] == 40002
        assert "x-request-id" in answer.headers
        answer = await client.post(
            FETCH_PATH, content=orjson.dumps({"replica_id": 1, "broker_epoch": 1})
        )
        assert answer.status_code == 400
        assert "partitions" in orjson.loads(answer.content)["message"]
        answer = await client.post(FETCH_PATH, content=b" " * 1001)
        assert answer.status_code == 413
        assert orjson.loads(answer.content)["error_code"] == 41301
        after = (await client.get("/metrics")).text
        assert fetch_count(after, "400") == fetch_count(before, "400") + 2
        assert fetch_count(after, "413") == fetch_count(before, "413") + 1


async def test_other_methods_on_the_path_go_to_the_router(tmp_path: Path) -> None:
    async with broker(tmp_path) as client:
        answer = await client.get(FETCH_PATH)
        assert answer.status_code == 404  # no REST route serves the path
        assert orjson.loads(answer.content) == {"error_code": 404, "message": "Not Found"}


async def test_a_fetch_before_the_broker_joined_is_a_retriable_503(tmp_path: Path) -> None:
    """Not joined yet is the leader's passing state, not the follower's mistake: 503 50301 with
    Retry-After (it was 400 once), so the follower backs off and asks again."""
    app = create_app(BrokerSettings(data_dir=str(tmp_path)))  # no lifespan: never started
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
        request = ReplicaFetchRequest(1, 1, [FetchPartition(unique("t"), 0, 0, 0, -1)])
        answer = await client.post(FETCH_PATH, content=request.to_json())
    assert answer.status_code == 503
    assert orjson.loads(answer.content)["error_code"] == 50301
    assert answer.headers["retry-after"] == "1"
