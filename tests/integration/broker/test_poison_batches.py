"""Poison batches: valid CRC, undecodable records. Refused whole; the partition stays readable."""

from __future__ import annotations

import base64
import functools
import os
from pathlib import Path

import cramjam
import httpx
import pytest

from headwater.records import Compression, encode_batch
from headwater.records.encoder import RecordTuple
from headwater.records.varint import encode_varint
from tests.integration.broker.in_process import BATCHES, KAFKA_BINARY, KAFKA_JSON, broker
from tests.integration.broker.test_produce import end_offsets, make_topic, post_batches
from tests.unit.broker.validation.test_records import record, seal
from tests.unit.headwater.records.test_compression import BOMB_SIZE, bomb

pytestmark = pytest.mark.anyio


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


CAP = 4 * 1_048_576
CODECS = [c for c in Compression if c != Compression.NONE]


@functools.cache
def section_bomb(codec: Compression) -> bytes:
    """200 MiB of zeros compressed; snappy's as large as a topic's 1 MiB batch allows (8 MiB)."""
    return bomb(codec, 8 * 1_048_576 if codec == Compression.SNAPPY else BOMB_SIZE)


@pytest.mark.parametrize("codec", CODECS)
async def test_a_decompression_bomb_is_refused_with_nothing_appended(
    tmp_path: Path, codec: Compression
) -> None:
    good = encode_batch([(None, b'{"n": 1}', [])])
    async with broker(tmp_path, max_decompressed_bytes=CAP) as client:
        topic = await make_topic(client)
        refused = await post_batches(client, topic, good + seal(section_bomb(codec), 1, codec))
        assert (refused.status_code, refused.json()["error_code"]) == (400, 40003)
        assert refused.json()["message"] == (
            f"batch at position {len(good)} decompresses to more than {CAP} bytes, the cap on "
            "one batch's records (BROKER_MAX_DECOMPRESSED_BYTES, or the topic's "
            "max.message.bytes when larger); nothing was appended"
        )
        assert await end_offsets(client, topic) == [0]
        assert (await post_batches(client, topic, good)).status_code == 200
        assert await end_offsets(client, topic) == [1]


async def test_a_gzip_bomb_meets_the_default_cap(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    refused = await post_batches(client, topic, seal(section_bomb(Compression.GZIP), 1, 1))
    assert (refused.status_code, refused.json()["error_code"]) == (400, 40003)
    assert f"more than {64 * 1_048_576} bytes" in refused.json()["message"]
    assert await end_offsets(client, topic) == [0]


def _large_records(size: int) -> list[RecordTuple]:
    """JSON records of about ``size`` bytes in all, compressing well below a mebibyte."""
    value = b'{"pad": "' + b"headwater " * 100 + b'"}'
    return [(None, value, [])] * (size // len(value))


@pytest.mark.parametrize("codec", CODECS)
async def test_a_large_batch_under_the_cap_appends_and_reads(
    tmp_path: Path, codec: Compression
) -> None:
    records = _large_records(CAP - 100_000)
    plain = encode_batch(records)
    assert CAP - 200_000 < len(plain) - 61 < CAP
    async with broker(tmp_path, max_decompressed_bytes=CAP) as client:
        topic = await make_topic(client)
        accepted = await post_batches(client, topic, encode_batch(records, compression=codec))
        assert accepted.status_code == 200, accepted.text
        assert await end_offsets(client, topic) == [len(records)]
        read = await client.get(
            f"/topics/{topic}/partitions/0/records",
            params={"offset": 0},
            headers={"accept": KAFKA_JSON},
        )
        assert read.status_code == 200, read.text
        assert len(read.json()) == len(records)


async def test_a_topic_with_larger_batches_takes_its_max_message_bytes_as_the_cap(
    tmp_path: Path,
) -> None:
    records = _large_records(3 * 1_048_576 // 2)
    batch = encode_batch(records, compression=Compression.ZSTD)
    async with broker(tmp_path, max_decompressed_bytes=1_048_576) as client:
        small = await make_topic(client)
        refused = await post_batches(client, small, batch)
        assert (refused.status_code, refused.json()["error_code"]) == (400, 40003)
        large = await make_topic(client, configs={"max.message.bytes": str(2 * 1_048_576)})
        accepted = await post_batches(client, large, batch)
        assert accepted.status_code == 200, accepted.text
        assert await end_offsets(client, large) == [len(records)]


async def test_a_stored_bomb_is_not_inflated_by_a_json_read(tmp_path: Path) -> None:
    """Stored with validation off: the JSON read refuses it under the same cap; raw reads work."""
    async with broker(tmp_path, max_decompressed_bytes=CAP, validate_records=False) as client:
        topic = await make_topic(client)
        stored = await post_batches(client, topic, seal(section_bomb(Compression.ZSTD), 1, 4))
        assert stored.status_code == 200, stored.text
        url = f"/topics/{topic}/partitions/0/records"
        for accept in (KAFKA_JSON, KAFKA_BINARY):
            read = await client.get(url, params={"offset": 0}, headers={"accept": accept})
            assert (read.status_code, read.json()["error_code"]) == (400, 40003)
            assert f"more than {CAP} bytes" in read.json()["message"]
        raw = await client.get(url, params={"offset": 0}, headers={"accept": BATCHES})
        assert raw.status_code == 200
        assert len(raw.content) == 61 + len(section_bomb(Compression.ZSTD))
