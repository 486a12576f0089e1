"""Avro reader/writer compatibility, case by case from the Avro spec's schema-resolution rules."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from headwater.registry.compatibility import Kind, Level, check, check_reader_writer
from headwater.registry.schema import ParsedSchema, SchemaReference, parse


def schema(value: Any) -> ParsedSchema:
    return parse(orjson.dumps(value).decode())


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def result(reader: Any, writer: Any) -> list[tuple[str, str, str]]:
    found = check_reader_writer(schema(reader), schema(writer))
    return [(i.kind.value, i.location, i.message) for i in found]


INT_FROM_LONG = "reader type: INT not compatible with writer type: LONG"
PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PROMOTES = {
    ("long", "int"),
    ("float", "int"),
    ("float", "long"),
    ("double", "int"),
    ("double", "long"),
    ("double", "float"),
    ("bytes", "string"),
    ("string", "bytes"),
}


@pytest.mark.parametrize("reader", PRIMITIVES)
@pytest.mark.parametrize("writer", PRIMITIVES)
def test_primitive_resolution_is_identity_or_a_spec_promotion(reader: str, writer: str) -> None:
    found = result(reader, writer)
    if reader == writer or (reader, writer) in PROMOTES:
        assert found == []
    else:
        message = f"reader type: {reader.upper()} not compatible with writer type: {writer.upper()}"
        assert found == [("TYPE_MISMATCH", "/", message)]


def test_reader_field_missing_in_writer_needs_a_default() -> None:
    old = record("R", {"name": "a", "type": "int"})
    new = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    assert result(new, old) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "b")]
    with_default = record(
        "R", {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}
    )
    assert result(with_default, old) == []
    # A null default is a default.
    nullable = record(
        "R", {"name": "a", "type": "int"}, {"name": "b", "type": ["null", "int"], "default": None}
    )
    assert result(nullable, old) == []


def test_writer_only_fields_are_skipped() -> None:
    old = record("R", {"name": "a", "type": "int"}, {"name": "gone", "type": "string"})
    new = record("R", {"name": "a", "type": "long"})
    assert result(new, old) == []


def test_field_type_mismatch_points_at_the_field_type() -> None:
    old = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "long"})
    new = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    assert result(new, old) == [("TYPE_MISMATCH", "/fields/1/type", INT_FROM_LONG)]


def test_field_aliases_match_renamed_writer_fields() -> None:
    old = record("R", {"name": "old_name", "type": "int"})
    new = record("R", {"name": "new_name", "type": "long", "aliases": ["old_name"]})
    assert result(new, old) == []
    assert result(record("R", {"name": "new_name", "type": "long"}), old) == [
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0", "new_name")
    ]


def test_named_types_match_by_unqualified_name_or_reader_alias_of_writer_full_name() -> None:
    writer = record("a.b.R", {"name": "x", "type": "int"})
    assert result(record("c.d.R", {"name": "x", "type": "int"}), writer) == []
    renamed = record("S", {"name": "x", "type": "int"})
    assert result(renamed, writer) == [("NAME_MISMATCH", "/name", "expected: a.b.R")]
    aliased = record("S", {"name": "x", "type": "int"}, aliases=["a.b.R"])
    assert result(aliased, writer) == []
    # An unqualified alias takes the reader's namespace, so it does not name a.b.R.
    short_alias = record("S", {"name": "x", "type": "int"}, aliases=["R"])
    assert result(short_alias, writer) == [("NAME_MISMATCH", "/name", "expected: a.b.R")]


def test_enum_symbols_and_enum_default() -> None:
    writer = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    assert result({"type": "enum", "name": "E", "symbols": ["A", "B", "C", "D"]}, writer) == []
    assert result({"type": "enum", "name": "E", "symbols": ["A"]}, writer) == [
        ("MISSING_ENUM_SYMBOLS", "/symbols", "[B, C]")
    ]
    with_default = {"type": "enum", "name": "E", "symbols": ["A", "Z"], "default": "Z"}
    assert result(with_default, writer) == []


def test_fixed_name_and_size() -> None:
    writer = {"type": "fixed", "name": "F", "size": 16}
    assert result({"type": "fixed", "name": "F", "size": 16}, writer) == []
    assert result({"type": "fixed", "name": "F", "size": 8}, writer) == [
        ("FIXED_SIZE_MISMATCH", "/size", "expected: 16, found: 8")
    ]
    assert result({"type": "fixed", "name": "G", "size": 16}, writer) == [
        ("NAME_MISMATCH", "/name", "expected: F")
    ]


def test_arrays_and_maps_resolve_their_items_and_values() -> None:
    assert result({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) == []
    assert result({"type": "array", "items": "int"}, {"type": "array", "items": "long"}) == [
        ("TYPE_MISMATCH", "/items", "reader type: INT not compatible with writer type: LONG")
    ]
    assert result({"type": "map", "values": "string"}, {"type": "map", "values": "int"}) == [
        ("TYPE_MISMATCH", "/values", "reader type: STRING not compatible with writer type: INT")
    ]
    assert result({"type": "array", "items": "int"}, {"type": "map", "values": "int"}) == [
        ("TYPE_MISMATCH", "/", "reader type: ARRAY not compatible with writer type: MAP")
    ]


def test_writer_union_needs_every_branch_readable() -> None:
    assert result(["null", "string", "int"], ["null", "string"]) == []
    assert result(["null", "string"], ["null", "string", "int"]) == [
        ("MISSING_UNION_BRANCH", "/2", "reader union lacking writer type: INT")
    ]
    # A non-union reader reads a union writer only if it reads every branch.
    assert result("string", ["null", "string"]) == [
        ("TYPE_MISMATCH", "/0", "reader type: STRING not compatible with writer type: NULL")
    ]
    assert result("long", ["int", "long"]) == []


def test_reader_union_needs_one_branch_for_a_plain_writer() -> None:
    assert result(["null", "long"], "int") == []
    assert result(["null", "string"], "int") == [
        ("MISSING_UNION_BRANCH", "/", "reader union lacking writer type: INT")
    ]


def test_recursive_types_terminate_and_are_checked() -> None:
    def linked(value_type: str) -> dict[str, Any]:
        return record(
            "Node",
            {"name": "value", "type": value_type},
            {"name": "next", "type": ["null", "Node"], "default": None},
        )

    assert result(linked("long"), linked("int")) == []
    assert result(linked("int"), linked("long")) == [
        ("TYPE_MISMATCH", "/fields/0/type", INT_FROM_LONG)
    ]


def test_nested_named_type_reused_by_name() -> None:
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}
    old = record("R", {"name": "a", "type": inner}, {"name": "b", "type": "Inner"})
    new_inner = {
        "type": "record",
        "name": "Inner",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
    }
    new = record("R", {"name": "a", "type": new_inner}, {"name": "b", "type": "Inner"})
    found = result(new, old)
    # The (Inner, Inner) pair is checked once, so the error is reported where it is first met.
    assert found == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1", "y")]


def test_logical_types_are_ignored_as_java_does() -> None:
    old = {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}
    new = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 4}
    assert result(new, old) == []


def test_references_resolve_named_types_from_other_subjects() -> None:
    address = parse(orjson.dumps(record("Address", {"name": "city", "type": "string"})).decode())
    ref = SchemaReference("Address", "address-value", 1)
    user = '{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}'
    parsed = parse(user, [(ref, address)])
    assert parsed.references == (ref,)
    assert check_reader_writer(parsed, parsed) == []
    bigger = parse(
        orjson.dumps(
            record("Address", {"name": "city", "type": "string"}, {"name": "zip", "type": "string"})
        ).decode()
    )
    newer = parse(user, [(ref, bigger)])
    found = check_reader_writer(newer, parsed)
    assert [(i.kind, i.location) for i in found] == [
        (Kind.READER_FIELD_MISSING_DEFAULT_VALUE, "/fields/0/type/fields/1")
    ]


V1 = record("R", {"name": "a", "type": "int"})
V2 = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"})
V3 = record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "string"})  # drops b's default


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (Level.NONE, []),
        (Level.BACKWARD, []),
        (Level.BACKWARD_TRANSITIVE, [(1, True, "READER_FIELD_MISSING_DEFAULT_VALUE")]),
        (Level.FORWARD, []),
        (Level.FORWARD_TRANSITIVE, []),
        (Level.FULL, []),
        (Level.FULL_TRANSITIVE, [(1, True, "READER_FIELD_MISSING_DEFAULT_VALUE")]),
    ],
)
def test_levels_choose_versions_and_directions(
    level: Level, expected: list[tuple[int, bool, str]]
) -> None:
    # V3 reads V2 (b is there) but not V1 (b missing, no default): only transitive levels that
    # check backward see it. Old readers ignore the writer-only b, so forward always passes.
    existing = [(1, schema(V1)), (2, schema(V2))]
    found = check(schema(V3), existing, level)
    got = [(f.version, f.new_is_reader, f.incompatibility.kind.value) for f in found]
    assert got == expected


def test_finding_message_has_confluent_shape() -> None:
    found = check(schema(V3), [(1, schema(V1))], Level.BACKWARD)
    assert found[0].message() == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field \\'b\\' at path "
        "\\'/fields/1\\' in the new schema has no default value and is missing in the old "
        "schema', additionalInfo:'b', oldSchemaVersion: 1}"
    )
