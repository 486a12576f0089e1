"""Broker produce over HTTP: REST Proxy v2 records, raw batches, acks, idempotence, bad input."""

from __future__ import annotations

import asyncio
import base64
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from headwater.records.batch import encode_batch
from headwater.records.crc import crc32c
from headwater_kernel.clock import ManualClock
from tests.integration.broker.in_process import (
    BATCHES,
    KAFKA_BINARY,
    KAFKA_JSON,
    broker,
    broker_app,
)
from tests.support import unique

pytestmark = pytest.mark.anyio


async def make_topic(
    client: httpx.AsyncClient, partitions: int = 1, configs: dict[str, str] | None = None
) -> str:
    name = unique("t")
    response = await client.post(
        "/topics", json={"name": name, "partitions": partitions, "configs": configs or {}}
    )
    assert response.status_code == 201, response.text
    return name


async def end_offsets(client: httpx.AsyncClient, topic: str) -> list[int]:
    body = (await client.get(f"/topics/{topic}")).json()
    return [p["end_offset"] for p in body["partitions"]]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def batch(values: list[bytes], **kwargs: Any) -> bytes:
    return encode_batch([(None, v, []) for v in values], **kwargs)


async def post_batches(
    client: httpx.AsyncClient, topic: str, body: bytes, partition: int = 0, acks: str = "1"
) -> httpx.Response:
    return await client.post(
        f"/topics/{topic}/partitions/{partition}/batches?acks={acks}",
        content=body,
        headers={"content-type": BATCHES},
    )


async def stored_values(client: httpx.AsyncClient, topic: str, partition: int = 0) -> list[Any]:
    """The values stored in a partition: JSON values as such, other bytes as UTF-8 text."""
    response = await client.get(
        f"/topics/{topic}/partitions/{partition}/records",
        params={"offset": 0},
        headers={"accept": KAFKA_BINARY},
    )
    values = []
    for record in response.json():
        value = base64.b64decode(record["value"])
        try:
            values.append(orjson.loads(value))
        except orjson.JSONDecodeError:
            values.append(value.decode())
    return values


async def test_rest_json_produce_routes_keys_like_kafka(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client, partitions=7)
    response = await client.post(
        f"/topics/{topic}",
        json={
            "records": [
                {"key": "foobar", "value": {"n": 1}},
                {"key": "foobar", "value": {"n": 2}},
                {"value": "explicit", "partition": 5},
            ]
        },
        headers={"content-type": KAFKA_JSON},
    )
    # The key bytes are the JSON text "\"foobar\"": murmur2 puts them on partition 1 of 7.
    assert response.json() == {
        "offsets": [
            {"partition": 1, "offset": 0, "error_code": None, "error": None},
            {"partition": 1, "offset": 1, "error_code": None, "error": None},
            {"partition": 5, "offset": 0, "error_code": None, "error": None},
        ],
        "key_schema_id": None,
        "value_schema_id": None,
    }
    assert await end_offsets(client, topic) == [0, 2, 0, 0, 0, 1, 0]
    assert await stored_values(client, topic, 1) == [{"n": 1}, {"n": 2}]


async def test_rest_binary_produce_uses_java_murmur2_partitions(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client, partitions=7)
    records = [{"key": b64(key), "value": b64(b"v-" + key)} for key in (b"foobar", b"21", b"abc")]
    response = await client.post(
        f"/topics/{topic}",
        json={"records": records},
        headers={"content-type": KAFKA_BINARY},
    )
    # Java vectors: foobar -> -790332482, 21 -> -973932308, abc -> 479470107; & 0x7fffffff % 7.
    assert [(o["partition"], o["offset"]) for o in response.json()["offsets"]] == [
        (0, 0),
        (3, 0),
        (4, 0),
    ]
    fetched = await client.get(
        f"/topics/{topic}/partitions/3/records",
        headers={"accept": KAFKA_BINARY},
    )
    assert [(r["key"], r["value"]) for r in fetched.json()] == [(b64(b"21"), b64(b"v-21"))]


async def test_unkeyed_records_of_one_request_stick_to_one_partition(
    client: httpx.AsyncClient,
) -> None:
    topic = await make_topic(client, partitions=4)
    response = await client.post(
        f"/topics/{topic}", json={"records": [{"value": i} for i in range(5)]}
    )
    offsets = response.json()["offsets"]
    assert len({o["partition"] for o in offsets}) == 1
    assert [o["offset"] for o in offsets] == [0, 1, 2, 3, 4]


async def test_produce_to_partition_path_and_headers(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client, partitions=2)
    response = await client.post(
        f"/topics/{topic}/partitions/1",
        json={
            "records": [
                {"key": "k", "value": "v", "headers": [{"key": "h", "value": "x"}]},
                {"value": None, "headers": [{"key": "empty", "value": None}]},
            ]
        },
    )
    assert [(o["partition"], o["offset"]) for o in response.json()["offsets"]] == [
        (1, 0),
        (1, 1),
    ]
    fetched = (await client.get(f"/topics/{topic}/partitions/1/records")).json()
    assert [(r["key"], r["value"], r["headers"]) for r in fetched] == [
        ("k", "v", [{"key": "h", "value": "x"}]),
        (None, None, [{"key": "empty", "value": None}]),
    ]


@pytest.mark.parametrize(
    ("content_type", "body", "status", "code"),
    [
        (KAFKA_JSON, b'{"records": [', 400, 40002),
        # No records is REST Proxy's 422 422, however it is said.
        (KAFKA_JSON, b"", 422, 422),
        (KAFKA_JSON, b"null", 422, 422),
        (KAFKA_JSON, b"{}", 422, 422),
        (KAFKA_JSON, b'{"values": []}', 422, 422),
        (KAFKA_JSON, b'{"records": []}', 422, 422),
        (KAFKA_BINARY, b'{"records": []}', 422, 422),
        (KAFKA_JSON, b'{"records": {}}', 422, 42205),
        (KAFKA_JSON, b"[]", 422, 42205),
        (KAFKA_BINARY, b'{"records": [{"value": "AAAA"}, {"value": "not base64!"}]}', 422, 42205),
        (KAFKA_JSON, b'{"records": [{"value": 1}, {"value": 2, "partition": 9}]}', 404, 40402),
        (KAFKA_JSON, b'{"records": [{"value": 1}, {"value": 2, "partition": -1}]}', 422, 42205),
        (KAFKA_JSON, b'{"records": [{"value": 1, "bogus": 2}]}', 422, 42205),
        ("text/csv", b"a,b", 415, 415),
    ],
)
async def test_rejected_rest_produce_appends_nothing(
    client: httpx.AsyncClient, content_type: str, body: bytes, status: int, code: int
) -> None:
    topic = await make_topic(client, partitions=2)
    response = await client.post(
        f"/topics/{topic}", content=body, headers={"content-type": content_type}
    )
    assert (response.status_code, response.json()["error_code"]) == (status, code)
    assert await end_offsets(client, topic) == [0, 0]


async def test_unknown_topic_and_partition(client: httpx.AsyncClient) -> None:
    missing = await client.post("/topics/nope", json={"records": [{"value": 1}]})
    assert (missing.status_code, missing.json()) == (
        404,
        {"error_code": 40401, "message": "Topic not found. There is no topic 'nope'."},
    )
    topic = await make_topic(client)
    bad = await post_batches(client, topic, batch([b"x"]), partition=3)
    assert (bad.status_code, bad.json()) == (
        404,
        {
            "error_code": 40402,
            "message": (
                f"Partition not found. Topic '{topic}' has 1 partition(s), 0..0; asked for 3."
            ),
        },
    )


async def test_a_missing_topic_or_partition_is_reported_before_a_malformed_body(
    client: httpx.AsyncClient,
) -> None:
    headers = {"content-type": KAFKA_JSON}
    missing = await client.post("/topics/nope", content=b'{"records": [', headers=headers)
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
    topic = await make_topic(client)
    bad_partition = await client.post(
        f"/topics/{topic}/partitions/5", content=b"[]", headers=headers
    )
    assert (bad_partition.status_code, bad_partition.json()["error_code"]) == (404, 40402)


async def test_auto_create_topics(tmp_path: Path) -> None:
    async with broker(tmp_path, auto_create_topics=True, default_partitions=2) as client:
        topic = unique("auto")
        response = await client.post(f"/topics/{topic}", json={"records": [{"value": 1}]})
        assert response.status_code == 200
        assert len((await client.get(f"/topics/{topic}")).json()["partitions"]) == 2


async def test_batches_acks_and_response(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    sent = batch([b"a", b"b", b"c"]) + batch([b"d"])
    one = await post_batches(client, topic, sent)
    assert one.json() == {
        "batches": [
            {"base_offset": 0, "last_offset": 2, "log_append_time": -1, "duplicate": False},
            {"base_offset": 3, "last_offset": 3, "log_append_time": -1, "duplicate": False},
        ]
    }
    zero = await post_batches(client, topic, batch([b"e"]), acks="0")
    assert (zero.status_code, zero.content) == (204, b"")
    via_header = await client.post(
        f"/topics/{topic}/partitions/0/batches",
        content=batch([b"f"]),
        headers={"content-type": "application/octet-stream", "Acks": "all"},
    )
    assert via_header.json()["batches"][0]["base_offset"] == 5
    bad = await post_batches(client, topic, batch([b"g"]), acks="2")
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42200)
    assert await stored_values(client, topic) == ["a", "b", "c", "d", "e", "f"]


async def test_log_append_time_topic_stamps_batches(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client, configs={"message.timestamp.type": "LogAppendTime"})
    response = await post_batches(client, topic, batch([b"x", b"y"], timestamp_ms=5))
    stamped = response.json()["batches"][0]["log_append_time"]
    assert stamped > 5
    fetched = await client.get(
        f"/topics/{topic}/partitions/0/records", headers={"accept": KAFKA_BINARY}
    )
    assert [r["timestamp"] for r in fetched.json()] == [stamped, stamped]


def corrupt(data: bytes) -> bytes:
    broken = bytearray(data)
    broken[-1] ^= 0xFF
    return bytes(broken)


def offset_gap(data: bytes) -> bytes:
    """The same records claiming 100 offsets (lastOffsetDelta 99), CRC re-sealed."""
    broken = bytearray(data)
    struct.pack_into(">i", broken, 23, 99)
    struct.pack_into(">I", broken, 17, crc32c(bytes(broken[21:])))
    return bytes(broken)


def wrong_magic(data: bytes) -> bytes:
    broken = bytearray(data)
    broken[16] = 1
    return bytes(broken)


@pytest.mark.parametrize(
    ("make_body", "status", "code"),
    [
        (lambda good: good + corrupt(good), 400, 40003),
        (lambda good: good + wrong_magic(good), 400, 40003),
        (lambda good: good + good[:-3], 400, 40003),
        (lambda good: good + b"\x00" * 20, 400, 40003),
        (lambda good: b"", 400, 40003),
        (lambda good: good + batch([b"z" * 300]), 413, 41302),
        (lambda good: good + offset_gap(good), 422, 42205),
    ],
    ids=[
        "bad-crc",
        "wrong-magic",
        "truncated",
        "trailing-garbage",
        "empty",
        "too-large",
        "offsets-without-records",
    ],
)
async def test_rejected_batches_append_nothing(
    tmp_path: Path, make_body: Any, status: int, code: int
) -> None:
    async with broker(tmp_path) as client:
        topic = await make_topic(client, configs={"max.message.bytes": "200"})
        body = make_body(batch([b"ok"]))
        response = await post_batches(client, topic, body)
        assert (response.status_code, response.json()["error_code"]) == (status, code)
        assert await end_offsets(client, topic) == [0]
        assert [p.stat().st_size for p in tmp_path.glob(f"{topic}-0/*.log")] == [0]


async def test_batch_error_messages_name_the_problem(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client, configs={"max.message.bytes": "100"})
    good = batch([b"ok"])
    response = await post_batches(client, topic, good + wrong_magic(good))
    assert response.json()["message"] == (
        f"unsupported magic 1 at position {len(good)}: only RecordBatch v2 (magic 2)"
    )
    big = batch([b"x" * 100])
    too_large = await post_batches(client, topic, big)
    assert too_large.json()["message"] == (
        f"Batch at position 0 is {len(big)} bytes; the topic's max.message.bytes is 100"
    )


async def test_media_checks_on_batches(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    wrong = await client.post(
        f"/topics/{topic}/partitions/0/batches",
        content=batch([b"x"]),
        headers={"content-type": "application/json"},
    )
    assert (wrong.status_code, wrong.json()["error_code"]) == (415, 415)
    unacceptable = await client.post(
        f"/topics/{topic}/partitions/0/batches",
        content=batch([b"x"]),
        headers={"content-type": BATCHES, "accept": "text/html"},
    )
    assert (unacceptable.status_code, unacceptable.json()["error_code"]) == (406, 406)
    assert await end_offsets(client, topic) == [0]


async def test_request_size_limit(tmp_path: Path) -> None:
    async with broker(tmp_path, max_request_bytes=1000) as client:
        topic = await make_topic(client)
        big = batch([b"x" * 400, b"y" * 400, b"z" * 400])
        response = await post_batches(client, topic, big)
        assert (response.status_code, response.json()) == (
            413,
            {
                "error_code": 41301,
                "message": f"Request body of {len(big)} bytes exceeds the 1000-byte limit",
            },
        )
        records = await client.post(f"/topics/{topic}", json={"records": [{"value": "v" * 2000}]})
        assert (records.status_code, records.json()["error_code"]) == (413, 41301)
        assert await end_offsets(client, topic) == [0]


async def idempotent_batch(
    producer: dict[str, int], seq: int, values: list[bytes], epoch: int | None = None
) -> bytes:
    return batch(
        values,
        producer_id=producer["producer_id"],
        producer_epoch=producer["producer_epoch"] if epoch is None else epoch,
        base_sequence=seq,
    )


async def test_idempotent_retry_is_stored_once_even_after_restart(tmp_path: Path) -> None:
    async with broker(tmp_path) as client:
        topic = await make_topic(client)
        producer = (await client.post("/producers", json={})).json()
        assert producer == {"producer_id": 0, "producer_epoch": 0}
        first = await idempotent_batch(producer, 0, [b"a", b"b"])
        stored = await post_batches(client, topic, first)
        assert stored.json()["batches"] == [
            {"base_offset": 0, "last_offset": 1, "log_append_time": -1, "duplicate": False}
        ]
        retry = await post_batches(client, topic, first)
        assert retry.json()["batches"] == [
            {"base_offset": 0, "last_offset": 1, "log_append_time": -1, "duplicate": True}
        ]
        assert await end_offsets(client, topic) == [2]
    async with broker(tmp_path) as client:
        again = await post_batches(client, topic, first)
        assert again.json()["batches"][0] == {
            "base_offset": 0,
            "last_offset": 1,
            "log_append_time": -1,
            "duplicate": True,
        }
        nxt = await post_batches(client, topic, await idempotent_batch(producer, 2, [b"c"]))
        assert nxt.json()["batches"][0]["base_offset"] == 2
        # Ids come from cluster-wide blocks: after a restart, a new block, never an issued id.
        assert (await client.post("/producers", json={})).json()["producer_id"] > 0
        assert await stored_values(client, topic) == ["a", "b", "c"]


async def test_sequence_gap_stale_epoch_and_unknown_producer(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    producer = (await client.post("/producers", json={})).json()
    await post_batches(client, topic, await idempotent_batch(producer, 0, [b"a"]))
    gap = await post_batches(client, topic, await idempotent_batch(producer, 2, [b"b"]))
    assert (gap.status_code, gap.json()) == (
        409,
        {
            "error_code": 40902,
            "message": "Producer 0 epoch 0: expected sequence 1, got 2 (last stored batch 0..0)",
        },
    )
    bumped = await client.post("/producers", json={"producer_id": 0, "producer_epoch": 0})
    assert bumped.json() == {"producer_id": 0, "producer_epoch": 1}
    stale = await post_batches(client, topic, await idempotent_batch(producer, 1, [b"c"]))
    assert (stale.status_code, stale.json()["error_code"]) == (409, 40903)
    stale_bump = await client.post("/producers", json={"producer_id": 0, "producer_epoch": 0})
    assert (stale_bump.status_code, stale_bump.json()["error_code"]) == (409, 40903)
    fresh = await post_batches(client, topic, await idempotent_batch(producer, 0, [b"d"], epoch=1))
    assert fresh.json()["batches"][0]["base_offset"] == 1
    unknown = await post_batches(
        client, topic, batch([b"e"], producer_id=99, producer_epoch=0, base_sequence=0)
    )
    assert (unknown.status_code, unknown.json()["error_code"]) == (404, 40405)
    unknown_bump = await client.post("/producers", json={"producer_id": 99, "producer_epoch": 0})
    assert (unknown_bump.status_code, unknown_bump.json()["error_code"]) == (404, 40405)
    assert await stored_values(client, topic) == ["a", "d"]


async def test_expired_producer_ids_are_unknown(tmp_path: Path) -> None:
    async with broker_app(tmp_path, producer_id_expiration_ms=1) as (app_broker, client):
        topic = await make_topic(client)
        producer = (await client.post("/producers", json={})).json()
        app_broker.clock = ManualClock(start_s=4_000_000_000.0)  # far past the 1 ms expiration
        # The cluster's store forgets ids by the database's clock, which the fake clock above
        # does not move: let more than the 1 ms pass on it too.
        await asyncio.sleep(0.02)
        assert await app_broker.expire_producers() == [0]
        expired = await post_batches(client, topic, await idempotent_batch(producer, 0, [b"a"]))
        assert expired.status_code == 404, expired.text
        assert expired.json()["error_code"] == 40405
        assert await end_offsets(client, topic) == [0]


async def test_streamed_bodies_without_content_length(tmp_path: Path) -> None:
    async def chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
        for i in range(0, len(data), size):
            yield data[i : i + size]

    async with broker(tmp_path, max_request_bytes=1000) as client:
        topic = await make_topic(client)
        good = batch([b"a" * 300, b"b" * 300])
        ok = await client.post(
            f"/topics/{topic}/partitions/0/batches",
            content=chunks(good, 100),
            headers={"content-type": BATCHES},
        )
        assert ok.json()["batches"][0]["last_offset"] == 1
        big = batch([b"c" * 600, b"d" * 600])
        refused = await client.post(
            f"/topics/{topic}/partitions/0/batches",
            content=chunks(big, 100),
            headers={"content-type": BATCHES},
        )
        assert (refused.status_code, refused.json()) == (
            413,
            {"error_code": 41301, "message": "Request body exceeds the 1000-byte limit"},
        )
        assert await end_offsets(client, topic) == [2]
