"""Schema parsing (42201 with a reason), identity text, normal form and the wire-format header."""

from __future__ import annotations

import pytest

from headwater.registry.errors import InvalidSchemaError, SchemaTooLargeError
from headwater.registry.schema import MAX_SCHEMA_BYTES, SchemaReference, fingerprint, parse
from headwater.registry.serde import SerializationError, decode_header, encode, topic_subject


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}', "Nope"),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
            "default value 'x' of field 'a' does not match its type 'int' at /fields/0/default",
        ),
        (
            '{"type":"enum","name":"E","symbols":["A"],"default":"B"}',
            "enum default 'B' is not a symbol at /default",
        ),
        ('["int", "int"]', "duplicate 'int' in union at /1"),
        (
            '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
            '{"name":"a","type":"long"}]}',
            "duplicate field 'a' in record R at /fields/1/name",
        ),
    ],
)
def test_invalid_schemas_say_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(InvalidSchemaError) as raised:
        parse(text)
    assert raised.value.error_code == 42201
    assert reason in raised.value.message


def test_unsupported_schema_type() -> None:
    with pytest.raises(InvalidSchemaError, match="Unsupported schema type 'PROTOBUF'"):
        parse('"string"', schema_type="PROTOBUF")


def test_too_large_schema_is_42209() -> None:
    doc = '{"type": "string", "doc": "' + "x" * MAX_SCHEMA_BYTES + '"}'
    with pytest.raises(SchemaTooLargeError) as raised:
        parse(doc)
    assert raised.value.error_code == 42209


def test_identity_text_drops_whitespace_only() -> None:
    a = parse('{ "type": "record", "name": "R",\n "fields": [ {"name": "a", "type": "int"} ] }')
    b = parse('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')
    assert a.text == '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    assert a.fingerprint == b.fingerprint
    reordered = parse('{"name":"R","type":"record","fields":[{"type":"int","name":"a"}]}')
    assert reordered.fingerprint != a.fingerprint
    assert reordered.normalized_fingerprint == a.normalized_fingerprint


def test_normal_form_qualifies_names_orders_keys_and_keeps_docs_and_defaults() -> None:
    parsed = parse(
        '{"namespace":"com.acme","fields":[{"default":0,"type":{"type":"long"},"name":"n",'
        '"doc":"count"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"],'
        '"aliases":["Z","x.Y"]}}],"name":"R","type":"record","custom":"p"}'
    )
    assert parsed.normalized_text == (
        '{"type":"record","name":"com.acme.R","fields":[{"name":"n","type":"long","doc":"count",'
        '"default":0},{"name":"e","type":{"type":"enum","name":"com.acme.E",'
        '"aliases":["com.acme.Z","x.Y"],"symbols":["A"]}}],"custom":"p"}'
    )
    same = parse(
        '{"type":"record","name":"com.acme.R","custom":"p","fields":[{"name":"n","type":"long",'
        '"doc":"count","default":0},{"name":"e","type":{"type":"enum","name":"com.acme.E",'
        '"symbols":["A"],"aliases":["x.Y","Z"]}}]}'
    )
    assert same.normalized_fingerprint == parsed.normalized_fingerprint
    assert parsed.normalized().text == parsed.normalized_text


def test_fingerprint_covers_type_text_and_references() -> None:
    ref = SchemaReference("A", "a-value", 1)
    assert fingerprint("AVRO", '"int"', ()) != fingerprint("AVRO", '"int"', (ref,))
    assert fingerprint("AVRO", '"int"', (ref,)) == fingerprint("AVRO", '"int"', (ref,))
    assert len(fingerprint("AVRO", '"int"', ())) == 64


def test_wire_format_header() -> None:
    data = encode(0x01020304, b"payload")
    assert data == b"\x00\x01\x02\x03\x04payload"
    schema_id, payload = decode_header(data)
    assert (schema_id, bytes(payload)) == (0x01020304, b"payload")
    with pytest.raises(SerializationError, match="magic byte 1"):
        decode_header(b"\x01\x00\x00\x00\x01x")
    with pytest.raises(SerializationError, match="too short"):
        decode_header(b"\x00\x00")
    assert topic_subject("orders") == "orders-value"
    assert topic_subject("orders", is_key=True) == "orders-key"
