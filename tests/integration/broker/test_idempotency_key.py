"""REST produce with an ``Idempotency-Key``: a retry is answered with the first attempt's offsets.

The key's records are stored as an idempotent producer's batches (``headwater_broker.idempotency``),
so the partition's own producer state -- replicated with the batches -- recognises a retry; the
cross-broker case (a relay whose answer was lost, retried after) is
``tests/e2e/replication/test_relay_outcome.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from headwater_broker import idempotency
from headwater_kernel.clock import ManualClock
from tests.integration.broker.in_process import KAFKA_JSON, broker_app
from tests.integration.broker.test_produce import batch, make_topic, post_batches, stored_values

pytestmark = pytest.mark.anyio


async def produce(
    client: httpx.AsyncClient, topic: str, records: list[dict[str, object]], key: str | None
) -> httpx.Response:
    headers = {"content-type": KAFKA_JSON}
    if key is not None:
        headers[idempotency.HEADER] = key
    return await client.post(f"/topics/{topic}", json={"records": records}, headers=headers)


async def test_a_retry_with_the_same_key_is_answered_the_first_offsets(
    client: httpx.AsyncClient,
) -> None:
    topic = await make_topic(client, partitions=3)
    records: list[dict[str, object]] = [
        {"key": "alice", "value": 1},
        {"value": 2},
        {"key": "bob", "value": 3},
    ]
    first = await produce(client, topic, records, "order-1")
    assert first.status_code == 200, first.text
    again = await produce(client, topic, records, "order-1")
    assert again.status_code == 200, again.text
    assert again.json()["offsets"] == first.json()["offsets"]
    other = await produce(client, topic, [{"value": 4}], "order-2")
    assert other.status_code == 200
    # Unkeyed records go where the key says: a retry finds them there.
    unkeyed = first.json()["offsets"][1]["partition"]
    assert unkeyed == idempotency.partition_of("order-1", 3)
    stored = [v for p in range(3) for v in await stored_values(client, topic, p)]
    assert sorted(stored) == [1, 2, 3, 4]


async def test_a_key_reused_for_other_records_is_refused(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    assert (await produce(client, topic, [{"value": 1}], "k")).status_code == 200
    reused = await produce(client, topic, [{"value": 1}, {"value": 2}], "k")
    assert reused.status_code == 409, reused.text
    assert reused.json()["error_code"] == 40910
    assert "Idempotency-Key 'k'" in reused.json()["message"]
    assert await stored_values(client, topic) == [1]


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "caf\u00e9"])
async def test_a_malformed_key_is_refused_before_anything_is_stored(
    client: httpx.AsyncClient, key: str
) -> None:
    topic = await make_topic(client)
    # Sent as UTF-8 bytes: a server reads header bytes as Latin-1, so "é" arrives as two
    # characters outside ASCII.
    headers = [
        (b"content-type", KAFKA_JSON.encode()),
        (idempotency.HEADER.encode(), key.encode()),
    ]
    answer = await client.post(
        f"/topics/{topic}", json={"records": [{"value": 1}]}, headers=headers
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error_code"] == 42200
    assert await stored_values(client, topic) == []


async def test_a_key_is_forgotten_after_its_window(tmp_path: Path) -> None:
    async with broker_app(tmp_path, idempotency_key_window_ms=1000) as (app_broker, client):
        topic = await make_topic(client)
        assert (await produce(client, topic, [{"value": 1}], "k")).status_code == 200
        await asyncio.sleep(0.01)
        clock = ManualClock(start_s=app_broker.now_ms() / 1000)
        app_broker.clock = clock
        clock.advance(2.0)
        await app_broker.expire_producers()
        late = await produce(client, topic, [{"value": 1}], "k")
        assert late.status_code == 200
        assert late.json()["offsets"][0]["offset"] == 1  # stored again: the window had passed
        assert await stored_values(client, topic) == [1, 1]


async def test_a_raw_batch_cannot_claim_a_key_derived_producer_id(
    client: httpx.AsyncClient,
) -> None:
    topic = await make_topic(client)
    pid = idempotency.producer_id("k")
    body = batch([b"x"], producer_id=pid, producer_epoch=0, base_sequence=0)
    answer = await post_batches(client, topic, body)
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40405)
