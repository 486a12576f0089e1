"""Broker topic admin over HTTP (ASGI transport, real log storage in tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater import __version__
from headwater.records.batch import encode_batch
from tests.integration.broker.in_process import broker
from tests.support import unique

pytestmark = pytest.mark.anyio


DEFAULT_CONFIGS = {
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "max.message.bytes": "1048588",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
}


def partition_body(p: int, beginning: int = 0, end: int = 0) -> dict[str, Any]:
    return {
        "partition": p,
        "leader": 0,
        "leader_epoch": 0,
        "replicas": [{"broker": 0, "leader": True, "in_sync": True}],
        "isr": [0],
        "beginning_offset": beginning,
        "end_offset": end,
    }


async def test_create_describe_list_delete(tmp_path: Path) -> None:
    name = unique("orders")
    async with broker(tmp_path) as client:
        created = await client.post(
            "/topics", json={"name": name, "partitions": 2, "configs": {"retention.ms": 3600000}}
        )
        assert created.status_code == 201
        expected = {
            "name": name,
            "topic_id": created.json()["topic_id"],
            "partitions": [partition_body(0), partition_body(1)],
            "configs": {**DEFAULT_CONFIGS, "retention.ms": "3600000"},
        }
        assert created.json() == expected
        assert (await client.get(f"/topics/{name}")).json() == expected
        await client.post("/topics", json={"name": "a-first"})
        assert (await client.get("/topics")).json() == ["a-first", name]
        assert (await client.get(f"/topics/{name}/partitions")).json() == [
            {k: v for k, v in partition_body(p).items() if not k.endswith("_offset")}
            for p in (0, 1)
        ]
        assert (await client.get(f"/topics/{name}/partitions/1")).json() == partition_body(1)
        deleted = await client.delete(f"/topics/{name}")
        assert (deleted.status_code, deleted.content) == (204, b"")
        gone = await client.get(f"/topics/{name}")
        assert (gone.status_code, gone.json()) == (
            404,
            {"error_code": 40401, "message": f"Topic not found. There is no topic '{name}'."},
        )
        assert (await client.get("/topics")).json() == ["a-first"]
        assert not list(tmp_path.glob(f"{name}-*"))


async def test_topics_and_configs_survive_a_restart(tmp_path: Path) -> None:
    name = unique("durable")
    async with broker(tmp_path) as client:
        await client.post(
            "/topics", json={"name": name, "partitions": 3, "configs": {"segment.bytes": "4096"}}
        )
        await client.post(f"/topics/{name}/partitions", json={"count": 4})
    async with broker(tmp_path) as client:
        body = (await client.get(f"/topics/{name}")).json()
        assert [p["partition"] for p in body["partitions"]] == [0, 1, 2, 3]
        assert body["configs"]["segment.bytes"] == "4096"


async def test_alter_configs_sets_and_deletes_overrides_durably(tmp_path: Path) -> None:
    name = unique("altered")
    configs = {"retention.ms": "60000", "segment.ms": "1000"}
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name, "configs": configs})
        altered = await client.patch(
            f"/topics/{name}/configs",
            json={
                "set": {"retention.bytes": 4096, "retention.ms": "120000"},
                "delete": ["segment.ms"],
            },
        )
        assert altered.status_code == 200, altered.text
        expected = {**DEFAULT_CONFIGS, "retention.ms": "120000", "retention.bytes": "4096"}
        assert altered.json()["configs"] == expected
        # Deleting what is not set, or setting what is already set, changes nothing.
        again = await client.patch(
            f"/topics/{name}/configs",
            json={"set": {"retention.ms": "120000"}, "delete": ["segment.bytes"]},
        )
        assert again.json()["configs"] == expected
    async with broker(tmp_path) as client:
        assert (await client.get(f"/topics/{name}")).json()["configs"] == expected


async def test_altered_configs_apply_to_the_next_append(tmp_path: Path) -> None:
    name = unique("stamped")
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name})
        batch = encode_batch([(None, b"x", [])], timestamp_ms=5)
        headers = {"content-type": "application/vnd.headwater.batches"}
        path = f"/topics/{name}/partitions/0/batches"
        before = await client.post(path, content=batch, headers=headers)
        assert before.json()["batches"][0]["log_append_time"] == -1
        await client.patch(
            f"/topics/{name}/configs", json={"set": {"message.timestamp.type": "LogAppendTime"}}
        )
        after = await client.post(path, content=batch, headers=headers)
        assert after.json()["batches"][0]["log_append_time"] > 5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"set": {"retention.ms": "-2"}},
            "Invalid value -2 for config 'retention.ms': must be at least -1",
        ),
        ({"set": {"compression.type": "zstd"}}, "Unknown topic config 'compression.type'; "),
        ({"delete": ["compression.type"]}, "Unknown topic config 'compression.type'; "),
        (
            {"set": {"segment.ms": "5"}, "delete": ["segment.ms"]},
            "Config(s) segment.ms both set and deleted",
        ),
        ({"set": {"cleanup.policy": "compact"}}, "cleanup.policy 'compact' is not supported"),
    ],
)
async def test_a_refused_alter_changes_nothing(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    name = unique("kept")
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name, "configs": {"segment.ms": "1000"}})
        refused = await client.patch(
            f"/topics/{name}/configs", json={"set": {"retention.ms": "1"}, **change}
        )
        assert (refused.status_code, refused.json()["error_code"]) == (422, 42202)
        assert refused.json()["message"].startswith(message)
        configs = (await client.get(f"/topics/{name}")).json()["configs"]
        assert configs == {**DEFAULT_CONFIGS, "segment.ms": "1000"}


async def test_alter_configs_of_a_missing_topic_or_without_json(client: httpx.AsyncClient) -> None:
    missing = await client.patch("/topics/nope/configs", json={"set": {}})
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
    await client.post("/topics", json={"name": "t"})
    text = await client.patch(
        "/topics/t/configs", content=b"retention.ms=1", headers={"content-type": "text/plain"}
    )
    assert (text.status_code, text.json()["error_code"]) == (415, 415)


async def test_default_partitions_setting(tmp_path: Path) -> None:
    async with broker(tmp_path, default_partitions=3) as client:
        body = (await client.post("/topics", json={"name": unique("d")})).json()
        assert len(body["partitions"]) == 3


@pytest.mark.parametrize(
    ("request_body", "status", "code", "message"),
    [
        ({"name": "bad/name"}, 422, 42201, None),
        ({"name": ".."}, 422, 42201, "Topic name cannot be '..'"),
        (
            {"name": "ok", "configs": {"retention.ms": "x"}},
            422,
            42202,
            "Invalid value 'x' for config 'retention.ms': expected an integer",
        ),
        ({"name": "ok", "configs": {"nope": "1"}}, 422, 42202, None),
        (
            {"name": "ok", "partitions": 0},
            422,
            42203,
            "Number of partitions must be between 1 and 10000, got 0",
        ),
        (
            {"name": "ok", "replication_factor": 3},
            422,
            42204,
            "Replication factor 3 is larger than the number of active brokers, 1",
        ),
        (
            {"name": "ok", "replica_assignment": [[0], [7]]},
            422,
            42206,
            "Partition 1: broker(s) [7] are not registered in this cluster",
        ),
        ({"partitions": 1}, 422, 42200, None),
    ],
)
async def test_invalid_create_requests(
    tmp_path: Path, request_body: dict[str, Any], status: int, code: int, message: str | None
) -> None:
    async with broker(tmp_path) as client:
        response = await client.post("/topics", json=request_body)
        assert (response.status_code, response.json()["error_code"]) == (status, code)
        if message is not None:
            assert response.json()["message"] == message
        assert (await client.get("/topics")).json() == []
        assert not list(tmp_path.glob("ok-*"))


async def test_duplicate_topic_is_40901(tmp_path: Path) -> None:
    name = unique("dup")
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name, "partitions": 1})
        again = await client.post("/topics", json={"name": name, "partitions": 5})
        assert (again.status_code, again.json()) == (
            409,
            {"error_code": 40901, "message": f"Topic '{name}' already exists"},
        )
        assert len((await client.get(f"/topics/{name}")).json()["partitions"]) == 1


async def test_partitions_only_grow(tmp_path: Path) -> None:
    name = unique("grow")
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name, "partitions": 2})
        grown = await client.post(f"/topics/{name}/partitions", json={"count": 3})
        assert [p["partition"] for p in grown.json()["partitions"]] == [0, 1, 2]
        shrink = await client.post(f"/topics/{name}/partitions", json={"count": 3})
        assert (shrink.status_code, shrink.json()) == (
            422,
            {
                "error_code": 42203,
                "message": f"Topic '{name}' has 3 partition(s); the new count must be larger, "
                "got 3",
            },
        )
        missing = await client.get(f"/topics/{name}/partitions/3")
        assert (missing.status_code, missing.json()["error_code"]) == (404, 40402)
        offsets = await client.get(f"/topics/{name}/partitions/2/offsets")
        assert offsets.json() == {"beginning_offset": 0, "end_offset": 0}


async def test_bad_media_and_json(client: httpx.AsyncClient) -> None:
    name = unique("refused")
    text = await client.post(
        "/topics", content=f'{{"name": "{name}"}}'.encode(), headers={"content-type": "text/plain"}
    )
    assert (text.status_code, text.json()["error_code"]) == (415, 415)
    broken = await client.post(
        "/topics", content=b'{"name": ', headers={"content-type": "application/json"}
    )
    assert (broken.status_code, broken.json()) == (
        400,
        {"error_code": 40002, "message": "Malformed JSON in request body"},
    )
    assert name not in (await client.get("/topics")).json()


async def test_request_size_limit_applies_to_admin_bodies(tmp_path: Path) -> None:
    async with broker(tmp_path, max_request_bytes=100) as client:
        big = await client.post("/topics", json={"name": "x", "configs": {}, "pad": "y" * 200})
        assert (big.status_code, big.json()["error_code"]) == (413, 41301)
        assert (await client.get("/topics")).json() == []


async def test_recreated_topic_starts_at_offset_zero(tmp_path: Path) -> None:
    name = unique("again")
    async with broker(tmp_path) as client:
        await client.post("/topics", json={"name": name})
        produced = await client.post(
            f"/topics/{name}", json={"records": [{"value": 1}, {"value": 2}]}
        )
        assert [o["offset"] for o in produced.json()["offsets"]] == [0, 1]
        await client.delete(f"/topics/{name}")
        await client.post("/topics", json={"name": name})
        offsets = await client.get(f"/topics/{name}/partitions/0/offsets")
        assert offsets.json() == {"beginning_offset": 0, "end_offset": 0}


async def test_health_and_openapi(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {
        "status": "ok",
        "service": "broker",
        "version": __version__,
        "pid": os.getpid(),
    }
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    spec = (await client.get("/openapi.json")).json()
    batches = spec["paths"]["/topics/{topic}/partitions/{partition}/batches"]["post"]
    assert set(batches["requestBody"]["content"]) == {
        "application/vnd.headwater.batches",
        "application/octet-stream",
    }
    produce = spec["paths"]["/topics/{topic}"]["post"]
    assert "application/vnd.kafka.binary.v2+json" in produce["requestBody"]["content"]


async def test_openapi_documents_response_models_and_errors(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    create = spec["paths"]["/topics"]["post"]["responses"]
    assert create["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TopicDescription"
    }
    assert create["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }
    fetch = spec["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]
    assert set(fetch["responses"]["200"]["content"]) == {
        "application/vnd.kafka.v2+json",
        "application/json",
        "application/vnd.kafka.json.v2+json",
        "application/vnd.kafka.binary.v2+json",
        "application/vnd.headwater.batches",
    }
    assert "416" in fetch["responses"]
    # The cluster: GET /cluster, 421 naming the leader on the fast paths, 503 with
    # Retry-After where a leader or the controller may be missing.
    described = spec["paths"]["/cluster"]["get"]["responses"]["200"]
    assert described["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ClusterDescription"
    }
    batches = spec["paths"]["/topics/{topic}/partitions/{partition}/batches"]["post"]
    for operation in (batches, fetch):
        misdirected = operation["responses"]["421"]["content"]["application/json"]["schema"]
        assert misdirected == {"$ref": "#/components/schemas/NotLeaderBody"}
        unavailable = operation["responses"]["503"]
        assert unavailable["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert "503" in spec["paths"]["/topics"]["post"]["responses"]
    not_leader = spec["components"]["schemas"]["NotLeaderBody"]["properties"]
    assert {"leader_id", "leader_url", "leader_epoch"} <= set(not_leader)


async def test_json_answers_respect_accept(client: httpx.AsyncClient) -> None:
    name = unique("listed")
    assert (await client.post("/topics", json={"name": name})).status_code == 201
    refused = await client.get("/topics", headers={"accept": "text/html"})
    assert (refused.status_code, refused.json()["error_code"]) == (406, 406)
    fine = await client.get("/topics", headers={"accept": "text/html, */*;q=0.1"})
    assert fine.status_code == 200
    assert name in fine.json()


async def test_cluster_describes_this_one_broker_cluster(tmp_path: Path) -> None:
    async with broker(tmp_path) as client:
        described = (await client.get("/cluster")).json()
        assert described == {
            "cluster_id": described["cluster_id"],
            "controller": {"broker_id": 0, "epoch": 1},
            "brokers": [
                {"broker_id": 0, "url": "http://127.0.0.1:8082", "rack": None, "state": "active"}
            ],
        }
        metrics = (await client.get("/metrics")).text
        assert "headwater_broker_active_controller 1.0" in metrics
        assert "headwater_broker_controller_epoch 1.0" in metrics
        assert "headwater_broker_fenced_brokers 0.0" in metrics
        assert "headwater_broker_partitions_without_leader 0.0" in metrics
    async with broker(tmp_path) as client:  # the same cluster after a restart
        again = (await client.get("/cluster")).json()
        assert again["cluster_id"] == described["cluster_id"]
        assert again["controller"]["epoch"] == 2


async def test_reassignment_route_validates_and_reports_the_state(
    client: httpx.AsyncClient,
) -> None:
    name = unique("reassign")
    assert (await client.post("/topics", json={"name": name, "partitions": 1})).status_code == 201
    path = f"/topics/{name}/partitions/0/reassignment"
    before = (await client.get(path)).json()
    assert before == {
        "topic": name,
        "partition": 0,
        "in_progress": False,
        "replicas": [0],
        "target_replicas": [0],
        "adding": [],
        "removing": [],
        "isr": [0],
        "leader": 0,
        "leader_epoch": before["leader_epoch"],
        "partition_epoch": before["partition_epoch"],
    }
    for replicas in ([], [0, 0], [0, 7]):
        refused = await client.post(path, json={"replicas": replicas})
        assert (refused.status_code, refused.json()["error_code"]) == (422, 42206)
    malformed = await client.post(path, json={"replicas": "0"})
    assert malformed.status_code == 422
    assert (await client.get(path)).json() == before
    # The replicas of before: nothing to move.
    same = await client.post(path, json={"replicas": [0]})
    assert same.status_code == 200
    assert same.json() == before
    missing = await client.get(f"/topics/{name}/partitions/3/reassignment")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40402)
    spec = (await client.get("/openapi.json")).json()
    route = spec["paths"]["/topics/{topic}/partitions/{partition}/reassignment"]
    assert route["post"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Reassignment"
    }
    assert "422" in route["post"]["responses"]
    assert "get" in route
