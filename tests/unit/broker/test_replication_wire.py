"""The replica-fetch wire format: requests checked field by field, answers framed and unframed."""

from __future__ import annotations

import struct

import orjson
import pytest

from headwater.errors import MalformedRequestError
from headwater.records.batch import encode_batch
from headwater_broker.replication.wire import (
    Diverging,
    FetchPartition,
    MalformedFetchResponseError,
    PartitionResult,
    ReplicaFetchRequest,
    decode_response,
    encode_response,
)


def test_request_round_trips() -> None:
    request = ReplicaFetchRequest(
        2,
        7,
        [FetchPartition("t", 0, 3, 120, 2, 4096), FetchPartition("u", 5, 1, 0)],
        max_wait_ms=250,
        min_bytes=10,
        max_bytes=1 << 20,
    )
    assert ReplicaFetchRequest.from_json(request.to_json()) == request
    body = orjson.loads(request.to_json())
    assert body["partitions"][1] == {
        "topic": "u",
        "partition": 5,
        "leader_epoch": 1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "max_bytes": 1 << 20,
    }


def test_request_defaults() -> None:
    request = ReplicaFetchRequest.from_json(
        b'{"replica_id": 1, "broker_epoch": 0, "partitions": '
        b'[{"topic": "t", "partition": 0, "leader_epoch": 0, "fetch_offset": 0}]}'
    )
    assert request.max_wait_ms == 500
    assert request.partitions[0].last_fetched_epoch == -1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"broker_epoch": 1, "partitions": []}', "'replica_id' is required"),
        (b'{"replica_id": true, "broker_epoch": 1, "partitions": []}', "must be an integer"),
        (b'{"replica_id": -1, "broker_epoch": 1, "partitions": []}', "must be >= 0"),
        (b'{"replica_id": 1, "broker_epoch": 1}', "'partitions' must be a list"),
        (
            b'{"replica_id": 1, "broker_epoch": 1, "max_wait_ms": 999999, "partitions": []}',
            "'max_wait_ms' must be <= 30000",
        ),
        (b'{"replica_id": 1, "broker_epoch": 1, "partitions": [3]}', "must be an object"),
        (
            b'{"replica_id": 1, "broker_epoch": 1, "partitions": [{"topic": "", "partition": 0}]}',
            "partitions[0].topic must be a string",
        ),
        (
            b'{"replica_id": 1, "broker_epoch": 1, "partitions": [{"topic": "t", "partition": 0,'
            b' "leader_epoch": 0}]}',
            "'partitions[0].fetch_offset' is required",
        ),
        (
            b'{"replica_id": 1, "broker_epoch": 1, "partitions": [{"topic": "t", "partition": 0,'
            b' "leader_epoch": 0, "fetch_offset": 0, "last_fetched_epoch": -2}]}',
            "'partitions[0].last_fetched_epoch' must be >= -1",
        ),
        (
            b'{"replica_id": 1, "broker_epoch": 1, "partitions": ['
            b'{"topic": "t", "partition": 0, "leader_epoch": 0, "fetch_offset": 0},'
            b'{"topic": "t", "partition": 0, "leader_epoch": 0, "fetch_offset": 5}]}',
            "repeats partition t-0",
        ),
    ],
)
def test_malformed_requests_are_400_40002_naming_the_field(body: bytes, message: str) -> None:
    with pytest.raises(MalformedRequestError) as info:
        ReplicaFetchRequest.from_json(body)
    assert message in info.value.message
    assert (info.value.http_status, info.value.error_code) == (400, 40002)


def batch_bytes(n: int) -> bytes:
    return encode_batch([(None, b"v%d" % i, []) for i in range(n)], timestamp_ms=1)


def test_response_round_trips_with_batches_after_the_table() -> None:
    results = [
        PartitionResult(
            "t",
            0,
            leader_epoch=3,
            high_watermark=10,
            log_start_offset=0,
            log_end_offset=12,
            records=batch_bytes(2),
        ),
        PartitionResult(
            "t",
            1,
            leader_epoch=3,
            high_watermark=4,
            log_start_offset=0,
            log_end_offset=9,
            diverging=Diverging(2, 7),
        ),
        PartitionResult("u", 0, error_code=40904, message="fenced", leader_epoch=5),
        PartitionResult("u", 1, records=batch_bytes(3)),
    ]
    body = b"".join(encode_response(results))
    (length,) = struct.unpack_from(">I", body)
    table = orjson.loads(body[4 : 4 + length])
    assert table["partitions"][1]["diverging"] == {"epoch": 2, "end_offset": 7}
    assert table["partitions"][0]["records_bytes"] == len(batch_bytes(2))
    assert body[4 + length :] == batch_bytes(2) + batch_bytes(3)
    assert decode_response(body) == results


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x00",
        struct.pack(">I", 50) + b"{}",
        struct.pack(">I", 2) + b"{}",  # no "partitions"
        struct.pack(">I", 5) + b"nope!",
    ],
)
def test_malformed_responses_are_refused(body: bytes) -> None:
    with pytest.raises(MalformedFetchResponseError):
        decode_response(body)


def test_response_with_missing_or_extra_batch_bytes_is_refused() -> None:
    body = b"".join(encode_response([PartitionResult("t", 0, records=batch_bytes(2))]))
    with pytest.raises(MalformedFetchResponseError, match="record bytes declared"):
        decode_response(body[:-1])
    with pytest.raises(MalformedFetchResponseError, match="after the last entry"):
        decode_response(body + b"x")
