"""Per-record validation of the Spark job: framing, schema ids, decoding, expected-schema checks."""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from collections.abc import Iterable
from typing import Any

import fastavro
import numpy as np
import pytest

from headwater.types import SchemaId
from headwater_spark.registry import RegisteredSchema
from headwater_spark.validation import PayloadValidator, Reason
from tests.support.schemas import ORDER, ORDER_V2

# id as a string: not readable as ORDER (string does not promote to long).
ROGUE = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}],
}
# int amount promotes to double, so data written with it is readable.
NARROW = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "int"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW"]}},
    ],
}
PROTO = RegisteredSchema(SchemaId(9), 'syntax = "proto3"; message M {}', "PROTOBUF")


def registered(schema_id: int, schema: dict[str, Any]) -> RegisteredSchema:
    return RegisteredSchema(SchemaId(schema_id), json.dumps(schema))


SCHEMAS = {
    1: registered(1, ORDER),
    2: registered(2, ORDER_V2),
    3: registered(3, ROGUE),
    4: registered(4, NARROW),
    9: PROTO,
}


def frame(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def order(i: int = 1, status: str = "PAID") -> dict[str, Any]:
    return {"id": i, "amount": 9.5, "status": status, "note": None}


@pytest.fixture
def validator() -> PayloadValidator:
    lookups: list[int] = []

    def lookup(schema_id: int) -> RegisteredSchema | None:
        lookups.append(schema_id)
        return SCHEMAS.get(schema_id)

    v = PayloadValidator(SCHEMAS[1], lookup)
    v.lookups = lookups  # type: ignore[attr-defined]  # test-only observation hook
    return v


def test_a_record_in_the_expected_schema_is_valid_and_decoded(validator: PayloadValidator) -> None:
    verdict = validator.validate(frame(1, ORDER, order(7)))
    assert verdict.reason is None
    assert verdict.schema_id == 1
    assert verdict.record == {"id": 7, "amount": 9.5, "status": "PAID", "note": None}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "record has no value (a tombstone)"),
        (b"", "value is 0 bytes, shorter than the 5-byte frame"),
        (b"\x00\x00\x00\x01", "value is 4 bytes, shorter than the 5-byte frame"),
        (b"\x01\x00\x00\x00\x01\x02", "magic byte is 0x01, expected 0x00"),
        (b'{"id": 1}', "magic byte is 0x7b, expected 0x00"),
    ],
)
def test_bad_framing(validator: PayloadValidator, value: bytes | None, message: str) -> None:
    verdict = validator.validate(value)
    assert (verdict.reason, verdict.message, verdict.schema_id) == (
        Reason.BAD_FRAMING,
        message,
        None,
    )


def test_unknown_schema_id_is_looked_up_once(validator: PayloadValidator) -> None:
    payload = frame(1, ORDER, order())
    unknown = b"\x00" + struct.pack(">I", 4242) + payload[5:]
    for _ in range(3):
        verdict = validator.validate(unknown)
        assert verdict.reason is Reason.UNKNOWN_SCHEMA_ID
        assert verdict.message == "schema id 4242 is not in the registry"
        assert verdict.schema_id == 4242
    assert validator.lookups == [4242]  # type: ignore[attr-defined]


def test_non_avro_writer_schema_is_unsupported(validator: PayloadValidator) -> None:
    verdict = validator.validate(b"\x00\x00\x00\x00\x09\x08\x96\x01")
    assert verdict.reason is Reason.UNSUPPORTED_SCHEMA
    assert verdict.message == "schema id 9 is PROTOBUF, not AVRO"


def test_truncated_payloads_are_decode_errors(validator: PayloadValidator) -> None:
    payload = frame(1, ORDER, {"id": 123456789, "amount": 1.0, "status": "NEW", "note": "hello"})
    for cut in range(6, len(payload)):
        verdict = validator.validate(payload[:cut])
        assert verdict.reason is Reason.DECODE_ERROR, cut
        assert verdict.message == "payload ends before the record does (truncated)"


def test_trailing_bytes_are_a_decode_error(validator: PayloadValidator) -> None:
    verdict = validator.validate(frame(1, ORDER, order()) + b"\x00\x00")
    assert (verdict.reason, verdict.message) == (
        Reason.DECODE_ERROR,
        "2 bytes left after the record",
    )


def test_enum_index_outside_the_symbols_is_an_invalid_record(validator: PayloadValidator) -> None:
    payload = bytearray(frame(1, ORDER, order(1, "NEW")))
    # id=1 (1 byte), amount (8 bytes), then the enum index: zig-zag 5 = symbol #5 of 2.
    payload[5 + 1 + 8] = 10
    verdict = validator.validate(bytes(payload))
    assert verdict.reason is Reason.INVALID_RECORD
    assert verdict.message == "an enum symbol or union branch index is outside the schema"


def test_union_branch_outside_the_schema_is_an_invalid_record(validator: PayloadValidator) -> None:
    payload = bytearray(frame(1, ORDER, order()))
    payload[-1] = 6  # the note union's branch index: 3 of 2
    assert validator.validate(bytes(payload)).reason is Reason.INVALID_RECORD


def test_a_newer_compatible_writer_resolves_into_the_expected_schema() -> None:
    v = PayloadValidator(SCHEMAS[2], SCHEMAS.get)  # expect v2; data written with v1
    verdict = v.validate(frame(1, ORDER, order(3)))
    assert verdict.reason is None
    assert verdict.record == {
        "id": 3,
        "amount": 9.5,
        "status": "PAID",
        "note": None,
        "channel": "web",
    }


def test_a_payload_cut_inside_a_field_the_expected_schema_drops_is_a_decode_error() -> None:
    # Expect v1; data written with v2, whose extra "channel" field resolution would skip unread.
    v = PayloadValidator(SCHEMAS[1], SCHEMAS.get)
    whole = frame(2, ORDER_V2, {**order(5), "channel": "mobile-app"})
    assert v.validate(whole).reason is None  # the pair is now cached: the hot path decides below
    cut = whole[:-4]  # inside "channel", the last field
    assert v.validate(cut).reason is Reason.DECODE_ERROR
    assert v.reasons([whole, cut, whole]) == [None, Reason.DECODE_ERROR, None]
    fresh = PayloadValidator(SCHEMAS[1], SCHEMAS.get)  # and on the first, uncached path
    assert fresh.validate(cut).reason is Reason.DECODE_ERROR


def test_type_promotion_and_enum_subset_are_readable(validator: PayloadValidator) -> None:
    verdict = validator.validate(frame(4, NARROW, {"id": 1, "amount": 3, "status": "NEW"}))
    assert verdict.reason is None
    assert verdict.record == {"id": 1, "amount": 3.0, "status": "NEW", "note": None}


def test_incompatible_writer_schema(validator: PayloadValidator) -> None:
    verdict = validator.validate(frame(3, ROGUE, {"id": "x-1"}))
    assert verdict.reason is Reason.INCOMPATIBLE_SCHEMA
    assert verdict.message == (
        "writer schema id 3 is not readable as expected schema id 1: "
        "The type at path '/fields/0/type' in the expected schema does not match the writer's "
        "(reader type: LONG not compatible with writer type: STRING); "
        "The field 'amount' at path '/fields/1' in the expected schema has no default value and "
        "is missing in the writer schema; "
        "The field 'status' at path '/fields/2' in the expected schema has no default value and "
        "is missing in the writer schema"
    )
    # An older expected schema missing a default for a field the writer lacks: incompatible too.
    v = PayloadValidator(
        registered(5, {**ORDER_V2, "fields": [*ORDER["fields"], {"name": "x", "type": "int"}]}),
        SCHEMAS.get,
    )
    assert v.validate(frame(1, ORDER, order())).reason is Reason.INCOMPATIBLE_SCHEMA


def test_garbage_after_a_good_frame_is_a_decode_error_not_a_crash(
    validator: PayloadValidator,
) -> None:
    verdict = validator.validate(b"\x00\x00\x00\x00\x01" + b"\xff" * 12)
    assert verdict.reason is Reason.DECODE_ERROR


def test_logical_types_decode(validator: PayloadValidator) -> None:
    schema = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}],
    }
    when = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
    v = PayloadValidator(registered(6, schema), {6: registered(6, schema)}.get)
    assert v.validate(frame(6, schema, {"at": when})).record == {"at": when}


def test_reasons_of_a_batch_equal_each_verdicts_reason(validator: PayloadValidator) -> None:
    good = frame(1, ORDER, order(3))
    values: list[bytes | None] = [
        good,
        frame(2, ORDER_V2, {**order(4), "channel": "app"}),
        None,
        b"\x01" + good[1:],
        b"\x00\x00",
        b"\x00" + struct.pack(">I", 404) + good[5:],
        good[:-3],
        good + b"\x00",
        frame(3, ROGUE, {"id": "x"}),
        b"\x00" + struct.pack(">I", 9) + b"\x02\x08",  # a PROTOBUF writer
        good,
    ]
    enum_out_of_range = bytearray(good)
    enum_out_of_range[5 + 1 + 8] = 8  # id (1 byte), amount (8 bytes), then enum index 4 of 2
    values.append(bytes(enum_out_of_range))
    assert validator.reasons(values) == [
        None,
        None,
        Reason.BAD_FRAMING,
        Reason.BAD_FRAMING,
        Reason.BAD_FRAMING,
        Reason.UNKNOWN_SCHEMA_ID,
        Reason.DECODE_ERROR,
        Reason.DECODE_ERROR,
        Reason.INCOMPATIBLE_SCHEMA,
        Reason.UNSUPPORTED_SCHEMA,
        None,
        Reason.INVALID_RECORD,
    ]
    assert validator.reasons(values) == [validator.validate(v).reason for v in values]
    # Column-wise (the fused read): the same reasons and writer ids, and the structure check
    # really takes the records framed with the expected id.
    data = b"".join(v or b"" for v in values) + bytes(10)
    lengths = np.array([-1 if v is None else len(v) for v in values], np.int64)
    starts = np.cumsum(np.maximum(lengths, 0)) - np.maximum(lengths, 0)
    per_record = validator.reasons_and_ids(values)
    assert validator.reasons_and_ids_columns(values, data, starts, lengths) == per_record
    checked: list[list[bytes | None]] = []
    original = validator.reasons_and_ids

    def spy(
        values: Iterable[bytes | None],
    ) -> tuple[list[Reason | None], list[SchemaId | None]]:
        checked.append(list(values))
        return original(values)

    validator.reasons_and_ids = spy  # type: ignore[method-assign]
    validator.reasons_and_ids_columns(values, data, starts, lengths)
    assert checked == [[v for v in values if v is not good]]


@pytest.mark.parametrize(
    ("expected_id", "writer_id", "writer"),
    [(1, 1, ORDER), (2, 1, ORDER), (1, 2, ORDER_V2), (1, 4, NARROW)],
)
def test_cached_pairs_decode_exactly_as_fastavro_schemaless_reader(
    expected_id: int, writer_id: int, writer: dict[str, Any]
) -> None:
    """After the first record of a writer, records take the prepared decode; it must give what
    fastavro's public reader gives, with and without resolution, and still classify failures."""
    v = PayloadValidator(SCHEMAS[expected_id], SCHEMAS.get)
    writer_parsed = fastavro.parse_schema(writer)
    expected_parsed = fastavro.parse_schema(json.loads(SCHEMAS[expected_id].schema_str))
    extra: dict[str, Any] = {"channel": "app"} if writer is ORDER_V2 else {}
    for i in range(40):
        record = {**order(i, "NEW" if i % 2 else "PAID"), "note": None if i % 3 else f"n{i}"}
        if writer is NARROW:
            record = {"id": i, "amount": i, "status": "NEW"}
        value = frame(writer_id, writer, {**record, **extra})
        want = fastavro.schemaless_reader(
            io.BytesIO(value[5:]),
            writer_parsed,
            None if writer_id == expected_id else expected_parsed,
        )
        verdict = v.validate(value)
        assert verdict.reason is None
        assert verdict.record == want
        assert v.reasons([value]) == [None]
    good = frame(writer_id, writer, {**record, **extra})
    # Cut inside ``amount`` (never a field the expected schema skips), and a byte too many.
    assert v.reasons([good[:6], good + b"\x01"]) == [Reason.DECODE_ERROR, Reason.DECODE_ERROR]
    assert v.validate(good[:6]).reason is Reason.DECODE_ERROR


REFUND = {
    "type": "record",
    "name": "Refund",
    "namespace": "shop",
    "fields": [{"name": "amount", "type": "double"}],
}


def test_record_strategies_check_each_record_type_against_its_own_schema() -> None:
    schemas = {**SCHEMAS, 5: registered(5, REFUND)}
    v = PayloadValidator({"shop.Order": schemas[2], "shop.Refund": schemas[5]}, schemas.get)
    # v1 Orders resolve into the expected v2 Order; Refunds are their own type.
    order_verdict = v.validate(frame(1, ORDER, order(3)))
    assert order_verdict.reason is None
    assert order_verdict.record["channel"] == "web"
    assert v.expected_name(1) == "shop.Order"
    refund_verdict = v.validate(frame(5, REFUND, {"amount": 2.0}))
    assert (refund_verdict.reason, refund_verdict.record) == (None, {"amount": 2.0})
    assert v.expected_name(5) == "shop.Refund"
    assert v.reasons_and_ids(
        [frame(1, ORDER, order()), frame(5, REFUND, {"amount": 1.0}), b"\x00"]
    ) == ([None, None, Reason.BAD_FRAMING], [1, 5, None])
    # A record type with no expected schema in this topic.
    only_orders = PayloadValidator({"shop.Order": schemas[1]}, schemas.get)
    unexpected = only_orders.validate(frame(5, REFUND, {"amount": 2.0}))
    assert unexpected.reason is Reason.UNEXPECTED_RECORD_TYPE
    assert unexpected.message == (
        "writer schema id 5 is record type shop.Refund, which has no expected schema here "
        "(expected types: ['shop.Order'])"
    )


def test_naming_strategies_name_subjects_as_confluent_does() -> None:
    from headwater_spark.schemas import NamingStrategy, subject_name

    assert NamingStrategy.parse("TopicNameStrategy") is NamingStrategy.TOPIC_NAME
    assert (
        NamingStrategy.parse("io.confluent.kafka.serializers.subject.RecordNameStrategy")
        is NamingStrategy.RECORD_NAME
    )
    assert subject_name(NamingStrategy.TOPIC_NAME, "orders", True, None) == "orders-key"
    assert subject_name(NamingStrategy.RECORD_NAME, "orders", False, "shop.Order") == "shop.Order"
    assert (
        subject_name(NamingStrategy.TOPIC_RECORD_NAME, "orders", False, "shop.Order")
        == "orders-shop.Order"
    )
    with pytest.raises(ValueError, match="needs a record name"):
        subject_name(NamingStrategy.RECORD_NAME, "orders", False, None)
