"""The column-wise structure check never calls a payload valid that fastavro does not decode."""

from __future__ import annotations

import io
import random
from typing import Any

import fastavro
import numpy as np
import pytest

from headwater_spark.avro_check import compile_check

MIXED = {
    "type": "record",
    "name": "Order",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "again", "type": "Status"},
    ],
}
WIDE = {
    "type": "record",
    "name": "Wide",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "blob", "type": "bytes"},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 3}},
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "Inner",
                "fields": [{"name": "n", "type": ["null", "int", "string", "Tag"]}],
            },
        },
        {"name": "big", "type": "long"},
    ],
}


def order(rng: random.Random) -> dict[str, Any]:
    return {
        "id": rng.randrange(-(1 << 62), 1 << 62),
        "customer": rng.choice(["c", "", "customer-" + "x" * rng.randrange(200), "caf\u00e9"]),
        "amount": rng.random() * 1e6,
        "status": rng.choice(["NEW", "PAID"]),
        "coupon": rng.choice([None, "SPRING", ""]),
        "again": "PAID",
    }


def wide(rng: random.Random) -> dict[str, Any]:
    return {
        "flag": rng.random() < 0.5,
        "small": rng.randrange(-(1 << 31), 1 << 31),
        "ratio": rng.random(),
        "blob": bytes(rng.randrange(256) for _ in range(rng.randrange(20))),
        "tag": b"abc",
        "inner": {"n": rng.choice([None, 7, -(1 << 30), "s", b"xyz"])},
        "big": rng.randrange(-(1 << 40), 1 << 40),
    }


def encode(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def decodes(schema: Any, payload: bytes) -> bool:
    buf = io.BytesIO(payload)
    try:
        fastavro.schemaless_reader(buf, schema, None)
    except Exception:
        return False
    return buf.tell() == len(payload)


def mutated(payload: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0 and payload:
        return payload[: rng.randrange(len(payload))]
    if kind == 1:
        return payload + bytes([rng.randrange(256)])
    if kind == 2 and payload:
        i = rng.randrange(len(payload))
        return payload[:i] + bytes([rng.randrange(256)]) + payload[i + 1 :]
    return bytes(rng.randrange(256) for _ in range(rng.randrange(30)))


def check(schema: Any, payloads: list[bytes]) -> np.ndarray:
    checker = compile_check(fastavro.parse_schema(schema))
    assert checker is not None
    data = b"".join(payloads) + bytes(10)
    lengths = np.array([len(p) for p in payloads], np.int64)
    ends = np.cumsum(lengths)
    return checker.certainly_valid(np.frombuffer(data, np.uint8), ends - lengths, ends)


@pytest.mark.parametrize(("schema", "make"), [(MIXED, order), (WIDE, wide)])
def test_accepted_payloads_decode_and_ascii_records_are_accepted(schema: Any, make: Any) -> None:
    rng = random.Random(3)
    parsed = fastavro.parse_schema(schema)
    good = [encode(parsed, make(rng)) for _ in range(400)]
    bad = [mutated(p, rng) for p in good for _ in range(3)]
    payloads = good + bad
    ok = check(schema, payloads)
    for payload, accepted in zip(payloads, ok.tolist(), strict=True):
        if accepted:
            assert decodes(parsed, payload), payload
    ascii_good = [i for i, p in enumerate(good) if "\u00e9".encode() not in p]
    assert all(ok[i] for i in ascii_good)
    # Most corrupted payloads are caught here already; the rest go to the exact path.
    assert not all(ok[len(good) :])


def test_schemas_it_cannot_walk_get_no_check() -> None:
    for schema in (
        {
            "type": "record",
            "name": "A",
            "fields": [{"name": "x", "type": {"type": "array", "items": "int"}}],
        },
        {
            "type": "record",
            "name": "M",
            "fields": [{"name": "x", "type": {"type": "map", "values": "int"}}],
        },
        {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]},
        {
            "type": "record",
            "name": "T",
            "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}],
        },
    ):
        assert compile_check(fastavro.parse_schema(schema)) is None
