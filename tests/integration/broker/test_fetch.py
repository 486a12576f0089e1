"""Broker fetch over HTTP: formats, bounds, long-poll, retention and offsets across restarts."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.records.batch import decode_batches, encode_batch
from tests.integration.broker.in_process import (
    BATCHES,
    KAFKA_BINARY,
    KAFKA_JSON,
    broker,
    broker_app,
)
from tests.support import unique

pytestmark = pytest.mark.anyio

DAY_MS = 86_400_000


async def make_topic(client: httpx.AsyncClient, configs: dict[str, str] | None = None) -> str:
    name = unique("f")
    response = await client.post("/topics", json={"name": name, "configs": configs or {}})
    assert response.status_code == 201, response.text
    return name


async def append(
    client: httpx.AsyncClient, topic: str, values: list[bytes], timestamp_ms: int | None = None
) -> int:
    body = encode_batch([(b'"k"', v, [("h", b"1")]) for v in values], timestamp_ms=timestamp_ms)
    response = await client.post(
        f"/topics/{topic}/partitions/0/batches",
        content=body,
        headers={"content-type": BATCHES},
    )
    assert response.status_code == 200, response.text
    base: int = response.json()["batches"][0]["base_offset"]
    return base


async def fetch(
    client: httpx.AsyncClient, topic: str, accept: str, **params: Any
) -> httpx.Response:
    return await client.get(
        f"/topics/{topic}/partitions/0/records", params=params, headers={"accept": accept}
    )


async def test_fetch_formats_and_bound_headers(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    await append(client, topic, [b'"a"', b'"b"'], timestamp_ms=1000)
    await append(client, topic, [b"not json"], timestamp_ms=2000)
    as_json = await fetch(client, topic, KAFKA_JSON, offset=1)
    assert as_json.headers["content-type"] == KAFKA_JSON
    # The answer stops before offset 2, whose value is not JSON: nothing is shown altered.
    assert as_json.json() == [
        {
            "topic": topic,
            "key": "k",
            "value": "b",
            "partition": 0,
            "offset": 1,
            "timestamp": 1000,
            "headers": [{"key": "h", "value": "1"}],
        },
    ]
    assert (
        as_json.headers["headwater-high-watermark"],
        as_json.headers["headwater-log-start-offset"],
        as_json.headers["headwater-next-offset"],
    ) == ("3", "0", "2")
    refused = await fetch(client, topic, KAFKA_JSON, offset=2)
    assert (refused.status_code, refused.json()) == (
        406,
        {
            "error_code": 40602,
            "message": f"The record at offset 2 of {topic}/0 cannot be shown in the json "
            "embedded format: its value is not JSON (8 bytes: 6e 6f 74 20 6a 73 6f 6e). Fetch "
            "it with Accept: application/vnd.kafka.binary.v2+json (base64), or skip it from "
            "offset 3",
        },
    )
    binary = await fetch(client, topic, KAFKA_BINARY, offset=2)
    assert [(r["key"], r["value"]) for r in binary.json()] == [
        (base64.b64encode(b'"k"').decode(), base64.b64encode(b"not json").decode())
    ]
    assert binary.headers["headwater-next-offset"] == "3"
    raw = await fetch(client, topic, BATCHES, offset=1)
    assert raw.headers["content-type"] == BATCHES
    # Raw batches start with the batch holding offset 1, as a Kafka fetch does.
    assert [(r.offset, r.value) for r in decode_batches(raw.content)] == [
        (0, b'"a"'),
        (1, b'"b"'),
        (2, b"not json"),
    ]
    assert raw.headers["headwater-next-offset"] == "3"
    limited = await fetch(client, topic, "application/json", offset=0, max_records=1)
    assert [r["offset"] for r in limited.json()] == [0]
    assert limited.headers["headwater-next-offset"] == "1"


async def test_max_bytes_returns_at_least_one_whole_batch(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    await append(client, topic, [b"x" * 500])
    await append(client, topic, [b"y" * 500])
    small = await fetch(client, topic, BATCHES, offset=0, max_bytes=10)
    assert [r.offset for r in decode_batches(small.content)] == [0]
    assert small.headers["headwater-next-offset"] == "1"


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"offset": -1}, 400, 40004),
        ({"offset": "abc"}, 400, 40004),
        ({"offset": 0, "max_bytes": 0}, 400, 40004),
        ({"offset": 3}, 416, 41601),
    ],
)
async def test_bad_offsets(
    client: httpx.AsyncClient, params: dict[str, Any], status: int, code: int
) -> None:
    topic = await make_topic(client)
    await append(client, topic, [b"1", b"2"])
    response = await fetch(client, topic, "application/json", **params)
    assert (response.status_code, response.json()["error_code"]) == (status, code)
    if code == 41601:
        assert response.json()["message"] == (
            f"Offset 3 is out of range for partition {topic}-0: valid range is [0, 2]"
        )


async def test_not_acceptable_and_unknown_partition(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    response = await fetch(client, topic, "text/html", offset=0)
    assert (response.status_code, response.json()["error_code"]) == (406, 406)
    missing = await client.get(f"/topics/{topic}/partitions/1/records")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40402)
    unknown = await client.get("/topics/none/partitions/0/records")
    assert (unknown.status_code, unknown.json()["error_code"]) == (404, 40401)


async def test_long_poll_returns_when_data_arrives(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    started = time.monotonic()
    waiting = asyncio.create_task(
        fetch(client, topic, "application/json", offset=0, max_wait_ms=10_000)
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await append(client, topic, [b"1"])
    response = await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 5
    assert [r["value"] for r in response.json()] == [1]


async def test_long_poll_times_out_with_an_empty_answer(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    started = time.monotonic()
    response = await fetch(client, topic, BATCHES, offset=0, max_wait_ms=300)
    elapsed = time.monotonic() - started
    assert (response.status_code, response.content) == (200, b"")
    assert response.headers["headwater-next-offset"] == "0"
    assert 0.25 <= elapsed < 3


async def test_retention_moves_the_log_start_and_offsets_never_restart(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 2 * DAY_MS
    configs = {"retention.ms": str(DAY_MS), "segment.bytes": "200"}
    async with broker_app(tmp_path) as (domain, client):
        topic = await make_topic(client, configs)
        for i in range(4):
            await append(client, topic, [b"x" * 60, str(i).encode()], timestamp_ms=old)
        assert await domain.enforce_retention() == 4
        offsets = await client.get(f"/topics/{topic}/partitions/0/offsets")
        assert offsets.json() == {"beginning_offset": 8, "end_offset": 8}
        below = await fetch(client, topic, "application/json", offset=7)
        assert (below.status_code, below.json()) == (
            416,
            {
                "error_code": 41601,
                "message": f"Offset 7 is out of range for partition {topic}-0: "
                "valid range is [8, 8]",
            },
        )
        assert await append(client, topic, [b"new"]) == 8
        assert await domain.enforce_retention() == 0
    async with broker_app(tmp_path) as (domain, client):
        offsets = await client.get(f"/topics/{topic}/partitions/0/offsets")
        assert offsets.json() == {"beginning_offset": 8, "end_offset": 9}
        assert await append(client, topic, [b"after restart"]) == 9
        values = await fetch(client, topic, KAFKA_BINARY, offset=8)
        assert [base64.b64decode(r["value"]) for r in values.json()] == [b"new", b"after restart"]


async def test_offsets_continue_after_everything_expired_and_a_restart(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 2 * DAY_MS
    async with broker_app(tmp_path) as (domain, client):
        topic = await make_topic(client, {"retention.ms": str(DAY_MS)})
        await append(client, topic, [b"1", b"2", b"3"], timestamp_ms=old)
        assert await domain.enforce_retention() == 1
    async with broker(tmp_path) as client:
        offsets = await client.get(f"/topics/{topic}/partitions/0/offsets")
        assert offsets.json() == {"beginning_offset": 3, "end_offset": 3}
        assert await append(client, topic, [b"4"]) == 3


async def test_lookup_offset_by_timestamp(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    await append(client, topic, [b"1", b"2"], timestamp_ms=1000)
    await append(client, topic, [b"3"], timestamp_ms=3000)
    path = f"/topics/{topic}/partitions/0/offsets/lookup"
    found = await client.get(path, params={"timestamp": 1500})
    assert found.json() == {"offset": 2, "timestamp": 3000}
    first = await client.get(path, params={"timestamp": 0})
    assert first.json() == {"offset": 0, "timestamp": 1000}
    none = await client.get(path, params={"timestamp": 3001})
    assert none.json() == {"offset": None, "timestamp": None}


async def test_concurrent_appends_get_distinct_contiguous_offsets(tmp_path: Path) -> None:
    async with broker(tmp_path, fsync="always") as client:
        topic = await make_topic(client)
        bases = await asyncio.gather(
            *(append(client, topic, [f"{i}-a".encode(), f"{i}-b".encode()]) for i in range(20))
        )
        assert sorted(bases) == list(range(0, 40, 2))
        values = await fetch(client, topic, KAFKA_BINARY, offset=0)
        assert len({r["value"] for r in values.json()}) == 40


async def test_domain_metrics(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    await append(client, topic, [b"1", b"2", b"3"])
    await fetch(client, topic, BATCHES, offset=0)
    text = (await client.get("/metrics")).text
    lines = {line for line in text.splitlines() if f'topic="{topic}"' in line}
    assert f'headwater_broker_produce_records_total{{topic="{topic}"}} 3.0' in lines
    assert f'headwater_broker_fetch_records_total{{topic="{topic}"}} 3.0' in lines
    assert f'headwater_broker_log_end_offset{{partition="0",topic="{topic}"}} 3.0' in lines
    await client.delete(f"/topics/{topic}")
    text = (await client.get("/metrics")).text
    assert f'topic="{topic}"' not in text


async def test_background_retention_runs_on_its_interval(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 2 * DAY_MS
    async with broker(tmp_path, retention_check_interval_ms=50) as client:
        topic = await make_topic(client, {"retention.ms": str(DAY_MS)})
        await append(client, topic, [b"1", b"2"], timestamp_ms=old)
        path = f"/topics/{topic}/partitions/0/offsets"
        deadline = time.monotonic() + 5
        while (await client.get(path)).json()["beginning_offset"] == 0:
            assert time.monotonic() < deadline, "retention did not run"
            await asyncio.sleep(0.05)
        assert (await client.get(path)).json() == {"beginning_offset": 2, "end_offset": 2}
