"""Poison batches: valid CRC, undecodable records. Refused whole; the partition stays readable."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import cramjam
import pytest

from headwater.records import Compression, encode_batch
from headwater.records.varint import encode_varint
from tests.integration.broker.test_produce import (
    BATCHES,
    KAFKA_BINARY,
    KAFKA_JSON,
    broker,
    end_offsets,
    make_topic,
    post_batches,
)
from tests.unit.headwater.records.test_validation import record, seal

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PLAIN = encode_batch([(None, b'"plain"', [])] * 3)[61:]
POISON = {
    "plain records flagged gzip": seal(PLAIN, 3, attributes=Compression.GZIP),
    "not gzip at all": seal(b"\x1f\x8bgarbage" * 4, 1, attributes=Compression.GZIP),
    "gzip of garbage": seal(
        bytes(cramjam.gzip.compress(os.urandom(40))), 1, attributes=Compression.GZIP
    ),
    "record length 2^40": seal(encode_varint(1 << 40) + b"\x00\x00\x00\x01\x02v\x00", 1),
    "fewer records than counted": seal(record(offset_delta=0) + record(offset_delta=1), 3),
    "more records than counted": seal(record(offset_delta=0) + record(offset_delta=1), 1),
    "a null header key": seal(record(b"\x00\x00\x00\x01\x02v\x02\x01\x00"), 1),
    "a negative header count": seal(record(b"\x00\x00\x00\x01\x02v\x01"), 1),
    "headers past the record": seal(record(b"\x00\x00\x00\x01\x02v\x02\x02h\x06"), 1),
}


@pytest.mark.parametrize("name", sorted(POISON))
async def test_a_poison_batch_is_refused_with_nothing_appended(tmp_path: Path, name: str) -> None:
    good = encode_batch([(b'"k"', b'{"n": 1}', [("h", b"1")])])
    async with broker(tmp_path) as client:
        topic = await make_topic(client)
        # Good batches before and after the poison one: the whole request is refused.
        refused = await post_batches(client, topic, good + POISON[name] + good)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error_code"] == 40003
        assert "batch at position" in refused.json()["message"]
        assert await end_offsets(client, topic) == [0]

        accepted = await post_batches(client, topic, good)
        assert accepted.status_code == 200, accepted.text
        assert await end_offsets(client, topic) == [1]
        url = f"/topics/{topic}/partitions/0/records"
        for accept in (KAFKA_JSON, KAFKA_BINARY, BATCHES):
            read = await client.get(url, params={"offset": 0}, headers={"accept": accept})
            assert read.status_code == 200, (accept, read.text)
        as_json = await client.get(url, params={"offset": 0}, headers={"accept": KAFKA_JSON})
        assert [(r["offset"], r["value"]) for r in as_json.json()] == [(0, {"n": 1})]
        as_binary = await client.get(url, params={"offset": 0}, headers={"accept": KAFKA_BINARY})
        assert base64.b64decode(as_binary.json()[0]["key"]) == b'"k"'


async def test_compressed_and_keyed_batches_still_append(tmp_path: Path) -> None:
    records = [(b"k%d" % i, b"%d" % i, [("h", b"v"), ("n", None)]) for i in range(50)]
    async with broker(tmp_path) as client:
        topic = await make_topic(client)
        body = b"".join(encode_batch(records, compression=codec) for codec in Compression)
        response = await post_batches(client, topic, body)
        assert response.status_code == 200, response.text
        assert await end_offsets(client, topic) == [50 * len(Compression)]


async def test_with_validation_off_a_poison_batch_is_appended(tmp_path: Path) -> None:
    """What BROKER_VALIDATE_RECORDS=false gives up, shown: the partition no longer reads."""
    async with broker(tmp_path, validate_records=False) as client:
        topic = await make_topic(client)
        response = await post_batches(client, topic, POISON["record length 2^40"])
        assert response.status_code == 200, response.text
        read = await client.get(
            f"/topics/{topic}/partitions/0/records",
            params={"offset": 0},
            headers={"accept": KAFKA_BINARY},
        )
        assert (read.status_code, read.json()["error_code"]) == (400, 40003)
