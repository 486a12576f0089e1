"""REST Proxy v2 embedded formats: produce bodies to records, fetched records to JSON."""

from __future__ import annotations

import base64

import orjson
import pytest

from headwater.errors import (
    EmbeddedFormatError,
    EmptyProduceError,
    HeadwaterError,
    InvalidRecordError,
    MalformedRequestError,
)
from headwater.records.batch import Record
from headwater_broker.api.embedded import (
    EmbeddedFormat,
    ProduceBody,
    RenderedRecords,
    decode_records,
    render_records,
)
from headwater_broker.appends import ProducerRecord


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_json_keys_and_values_are_stored_as_their_json_text() -> None:
    body = orjson.dumps(
        {
            "records": [
                {"key": "k1", "value": {"n": 1, "tags": ["a"]}, "partition": 2},
                {"value": 7, "headers": [{"key": "trace", "value": "é1"}, {"key": "none"}]},
                {"key": None, "value": None},
            ]
        }
    )
    assert decode_records(body, "json") == [
        ProducerRecord(2, b'"k1"', b'{"n":1,"tags":["a"]}', []),
        ProducerRecord(None, None, b"7", [("trace", "é1".encode()), ("none", None)]),
        ProducerRecord(None, None, None, []),
    ]


def test_binary_keys_values_and_headers_are_base64() -> None:
    body = orjson.dumps(
        {
            "records": [
                {
                    "key": b64(b"\x00k"),
                    "value": b64(b"\xffvalue"),
                    "headers": [{"key": "h", "value": b64(b"\x01")}],
                },
                {"value": None, "partition": 0},
            ]
        }
    )
    assert decode_records(body, "binary") == [
        ProducerRecord(None, b"\x00k", b"\xffvalue", [("h", b"\x01")]),
        ProducerRecord(0, None, None, []),
    ]


def test_produce_body_decodes_when_asked_not_when_built() -> None:
    source = ProduceBody(b'{"records": [{"value": "v"}]}', "json")
    assert source.decode() == [ProducerRecord(None, None, b'"v"', [])]
    broken = ProduceBody(b"{", "json")
    with pytest.raises(MalformedRequestError):
        broken.decode()


@pytest.mark.parametrize(
    ("body", "fmt", "error", "message"),
    [
        (b"[1]", "json", InvalidRecordError, 'The body must be an object: {"records": [...]}'),
        (b'{"records": []}', "json", EmptyProduceError, "records may not be empty"),
        (b"", "binary", EmptyProduceError, "records may not be empty: the body is empty"),
        (b'{"records": [1]}', "json", InvalidRecordError, "records[0] must be an object"),
        (
            b'{"records": [{"value": 1}, {"value": 1, "offset": 3}]}',
            "json",
            InvalidRecordError,
            "records[1] has unknown field(s): ['offset']",
        ),
        (
            b'{"records": [{"value": 1, "partition": true}]}',
            "json",
            InvalidRecordError,
            "records[0].partition must be a non-negative integer",
        ),
        (
            b'{"records": [{"value": 1, "headers": {"k": "v"}}]}',
            "json",
            InvalidRecordError,
            "records[0].headers must be a list",
        ),
        (
            b'{"records": [{"value": 1, "headers": [{"key": "k", "value": 5}]}]}',
            "json",
            InvalidRecordError,
            "records[0].headers[0].value must be a string or null",
        ),
        (
            b'{"records": [{"value": 12}]}',
            "binary",
            InvalidRecordError,
            "records[0].value must be a base64 string in the binary format",
        ),
        (
            b'{"records": [{"key": "%%%"}]}',
            "binary",
            InvalidRecordError,
            "records[0].key is not valid base64",
        ),
    ],
)
def test_malformed_bodies_are_refused_with_the_place_named(
    body: bytes, fmt: EmbeddedFormat, error: type[HeadwaterError], message: str
) -> None:
    with pytest.raises(error) as raised:
        decode_records(body, fmt)
    assert str(raised.value).startswith(message)


def test_bodies_that_are_not_json_are_400() -> None:
    with pytest.raises(MalformedRequestError) as raised:
        decode_records(b'{"records": [', "json")
    assert str(raised.value).startswith("Malformed JSON in request body: ")


RECORDS = [
    Record(offset=5, timestamp=1000, key=b'"k"', value=b'{"n":1}', headers=[("h", b"x")]),
    Record(offset=6, timestamp=1001, key=None, value=b'"two"', headers=[("n", None)]),
]
# What the user read back as "\u0000...\ufffd?\u0006EUR": an Avro payload in the
# Confluent wire format, which is not JSON.
AVRO = b"\x00\x00\x00\x00\x01\x0c\xb0\x9e?\x06EUR"


def test_json_rendering_turns_stored_json_back_into_values() -> None:
    rendered = render_records("orders", 3, RECORDS, binary=False)
    assert rendered == RenderedRecords(
        [
            {
                "topic": "orders",
                "key": "k",
                "value": {"n": 1},
                "partition": 3,
                "offset": 5,
                "timestamp": 1000,
                "headers": [{"key": "h", "value": "x"}],
            },
            {
                "topic": "orders",
                "key": None,
                "value": "two",
                "partition": 3,
                "offset": 6,
                "timestamp": 1001,
                "headers": [{"key": "n", "value": None}],
            },
        ],
        stopped_at=None,
    )


def test_json_rendering_stops_before_a_record_that_is_not_json() -> None:
    stored = [*RECORDS, Record(7, 1002, None, AVRO, []), Record(8, 1003, None, b"1", [])]
    rendered = render_records("orders", 3, stored, binary=False)
    assert [r["offset"] for r in rendered.body] == [5, 6]
    assert rendered.stopped_at == 7


@pytest.mark.parametrize(
    ("record", "what"),
    [
        (
            Record(7, 0, None, AVRO, []),
            "its value is not JSON (13 bytes: 00 00 00 00 01 0c b0 9e 3f 06 45 55 52)",
        ),
        (Record(7, 0, b"user-1", b"1", []), "its key is not JSON (6 bytes: 75 73 65 72 2d 31)"),
        (Record(7, 0, None, b"", []), "its value is not JSON (0 bytes: )"),
        (
            Record(7, 0, None, b"1", [("trace", b"\xff\xfe")]),
            "the value of its header 'trace' is not UTF-8 text",
        ),
    ],
)
def test_a_first_record_that_is_not_json_is_a_clear_error(record: Record, what: str) -> None:
    with pytest.raises(EmbeddedFormatError) as raised:
        render_records("orders", 3, [record, *RECORDS], binary=False)
    assert raised.value.message == (
        f"The record at offset 7 of orders/3 cannot be shown in the json embedded format: {what}. "
        "Fetch it with Accept: application/vnd.kafka.binary.v2+json (base64), or skip it from "
        "offset 8"
    )
    assert (raised.value.http_status, raised.value.error_code) == (406, 40602)


def test_binary_rendering_is_base64_of_the_stored_bytes() -> None:
    stored = [*RECORDS, Record(7, 1002, None, AVRO, [("trace", b"\xff\xfe")])]
    rendered = render_records("orders", 0, stored, binary=True)
    assert rendered.stopped_at is None
    [first, second, third] = rendered.body
    assert (first["key"], first["value"], first["headers"]) == (
        b64(b'"k"'),
        b64(b'{"n":1}'),
        [{"key": "h", "value": b64(b"x")}],
    )
    assert (second["key"], second["value"], second["headers"]) == (
        None,
        b64(b'"two"'),
        [{"key": "n", "value": None}],
    )
    assert (third["value"], third["headers"]) == (
        b64(AVRO),
        [{"key": "trace", "value": b64(b"\xff\xfe")}],
    )


def test_a_json_body_renders_back_to_what_was_sent() -> None:
    sent = [{"key": {"id": 1}, "value": ["x", 2, None]}, {"key": None, "value": "plain"}]
    decoded = decode_records(orjson.dumps({"records": sent}), "json")
    stored = [Record(i, 0, r.key, r.value, r.headers) for i, r in enumerate(decoded)]
    rendered = render_records("t", 0, stored, binary=False)
    assert [{"key": r["key"], "value": r["value"]} for r in rendered.body] == sent
