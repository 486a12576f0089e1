"""Declarations Java Avro refuses are 42201 naming their JSON pointer; what it takes is taken.

Each refused case says where it is wrong; each accepted case is one where Java Avro (so
Confluent) is laxer than the strict reading of the spec, or than Apache's Python parser.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from headwater.registry.avro_rules import MAX_DEPTH, is_valid_name, is_valid_namespace
from headwater.registry.errors import InvalidSchemaError
from headwater.registry.schema import SchemaReference, parse


def rec(*fields: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": "R", "fields": list(fields), **extra}


def field(type_: Any, name: str = "a", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def refusal(schema: Any) -> str:
    with pytest.raises(InvalidSchemaError) as raised:
        parse(orjson.dumps(schema).decode())
    assert raised.value.error_code == 42201
    return raised.value.message


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (rec(name="1abc"), "record name '1abc' is not a valid Avro name at /name"),
        (rec(name=""), "record name '' is not a valid Avro name at /name"),
        (rec(name="a.1b"), "record name '1b' is not a valid Avro name at /name"),
        (rec(name=".R"), "name '.R' has an empty namespace part at /name"),
        (rec(name="int"), "a named type may not be named after the primitive 'int' at /name"),
        (rec(namespace="1ns"), "namespace '1ns' is not dot-separated Avro names at /namespace"),
        (rec(namespace="a..b"), "namespace 'a..b' is not dot-separated Avro names at /namespace"),
        (rec(name="1x.R"), "namespace '1x' is not dot-separated Avro names at /name"),
        (rec(namespace=5), "namespace must be a string at /namespace"),
        ({"type": "record", "fields": []}, "a record needs a string 'name' at /name"),
        ({"type": "record", "name": "R"}, "record R needs a 'fields' array at /fields"),
        (
            rec(field("int", name="a-b")),
            "field name 'a-b' is not a valid Avro name at /fields/0/name",
        ),
        (rec(field("int", name="")), "field name '' is not a valid Avro name at /fields/0/name"),
        (rec({"type": "int"}), "field name null is not a valid Avro name at /fields/0/name"),
        (rec({"name": "a"}), "field 'a' has no type at /fields/0"),
        (rec("a"), "a field must be an object at /fields/0"),
        (
            rec(field("int"), field("long", name="b"), field("int")),
            "duplicate field 'a' in record R at /fields/2/name",
        ),
        (
            rec(field("int", order="up")),
            "order 'up' is not ascending, descending or ignore at /fields/0/order",
        ),
        ({"type": "fixed", "name": "F", "size": -1}, "fixed size -1 is not an integer from 0"),
        ({"type": "fixed", "name": "F", "size": "x"}, "fixed size 'x' is not an integer from 0"),
        ({"type": "fixed", "name": "F", "size": 4.0}, "fixed size 4.0 is not an integer"),
        ({"type": "fixed", "name": "F", "size": True}, "fixed size true is not an integer"),
        ({"type": "fixed", "name": "F", "size": 2**31}, "fixed size 2147483648 is not an"),
        (
            {"type": "fixed", "name": "F"},
            "fixed size null is not an integer from 0 to 2^31-1 at /size",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "b-c"]},
            "enum symbol 'b-c' is not a valid Avro name at /symbols/1",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "B", "A"]},
            "duplicate enum symbol 'A' at /symbols/2",
        ),
        ({"type": "enum", "name": "E", "symbols": [1]}, "enum symbol 1 is not a valid Avro name"),
        (
            {"type": "enum", "name": "E", "symbols": "A"},
            "enum E needs a 'symbols' array at /symbols",
        ),
        (rec(aliases=["1x"]), "alias '1x' is not a valid Avro name at /aliases/0"),
        (rec(aliases="x"), "aliases must be an array at /aliases"),
        (rec(field("int", aliases=[3])), "alias 3 is not a string at /fields/0/aliases/0"),
        (rec(field("strin")), "unknown type 'strin' at /fields/0/type"),
        ("Int", "unknown type 'Int' at /"),
        ({"type": {"type": "int"}}, "an object schema needs a string 'type' at /type"),
        ({"type": "array"}, "array has no 'items' at /"),
        (5, "5 is not a schema at /"),
        (["int", ["null"]], "a union may not contain a union at /1"),
        (
            ["null", {"type": "record", "name": "n.R", "fields": []}, "n.R"],
            "duplicate 'n.R' in union at /2",
        ),
        (
            rec(field({"type": "record", "name": "R", "fields": []})),
            "'R' is defined twice at /fields/0/type/name",
        ),
        (rec(field("S"), field(rec(name="S"), name="b")), "unknown type 'S' at /fields/0/type"),
    ],
)
def test_refused_declarations_name_their_place(schema: Any, message: str) -> None:
    assert message in refusal(schema)


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("int", "1"),
        ("int", 1.0),
        ("int", 2**31),
        ("int", True),
        ("long", 2**63),
        ("float", "1.5"),
        ("boolean", 1),
        ("null", 0),
        ("string", None),
        ("bytes", 1),
        ({"type": "array", "items": "int"}, ["x"]),
        ({"type": "map", "values": "int"}, {"k": "v"}),
        ({"type": "map", "values": "int"}, [1]),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, 0),
        ({"type": "fixed", "name": "F", "size": 2}, 12),
        (["int", "null"], "x"),
        (rec(field("int"), name="S"), {}),
        (rec(field("int"), name="S"), {"a": "x"}),
        (rec(field("int"), name="S"), [1]),
    ],
)
def test_defaults_that_do_not_match_their_type_are_refused(type_: Any, default: Any) -> None:
    message = refusal(rec(field(type_, name="f", default=default)))
    assert "of field 'f' does not match its type" in message
    assert message.endswith("at /fields/0/default")


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("int", -(2**31)),
        ("long", 2**63 - 1),
        ("float", 1),  # any JSON number for float and double
        ("double", 2.5),
        ("double", "NaN"),
        ("bytes", "\u00ff"),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, "B"),  # Java checks only for a string
        ({"type": "fixed", "name": "F", "size": 2}, "abc"),  # ... and so for fixed
        (["null", "int"], 1),  # a union's default may match any branch
        (["int", "null"], None),
        (rec(field("int"), field("string", name="b", default="x"), name="S"), {"a": 1}),
        ({"type": "array", "items": ["null", "long"]}, [None, 1]),
        ({"type": "map", "values": "double"}, {"k": 1}),
    ],
)
def test_defaults_java_avro_takes_are_taken(type_: Any, default: Any) -> None:
    parse(orjson.dumps(rec(field(type_, name="f", default=default))).decode())


def test_a_default_may_use_a_type_defined_later_or_by_a_reference() -> None:
    later = rec(
        field("int", name="n"),
        field({"type": "enum", "name": "E", "symbols": ["A"]}, name="e"),
        field({"type": "array", "items": "E"}, name="es", default=["A"]),
    )
    parse(orjson.dumps(later).decode())
    base = parse('{"type":"record","name":"x.Base","fields":[{"name":"id","type":"long"}]}')
    ref = SchemaReference("x.Base", "base", 1)
    uses = rec(field("x.Base", name="b", default={"id": 7}))
    parse(orjson.dumps(uses).decode(), [(ref, base)])
    bad = rec(field("x.Base", name="b", default={"id": "7"}))
    with pytest.raises(InvalidSchemaError, match=r"at /fields/0/default"):
        parse(orjson.dumps(bad).decode(), [(ref, base)])
    clash = rec(name="x.Base")
    with pytest.raises(InvalidSchemaError, match=r"'x\.Base' is defined twice at /name"):
        parse(orjson.dumps(clash).decode(), [(ref, base)])


def test_what_java_avro_takes_beyond_the_strict_spec() -> None:
    # Any BMP letter or digit (Java's Character.isLetter / isDigit), never an astral one.
    assert all(is_valid_name(n) for n in ("Größe", "_x\u0663"))
    assert not any(is_valid_name(n) for n in ("\U0001d49c", "\u0663x", "a b"))
    assert all(is_valid_namespace(n) for n in ("", "com.acme_1"))
    assert not any(is_valid_namespace(n) for n in ("com.", ".com"))
    parse(orjson.dumps(rec(field("int", name="größe"), name="Zähler")).decode())
    # The order in any case (Order.valueOf of the upper-cased text); field aliases are strings.
    parse(orjson.dumps(rec(field("int", order="DESCENDING", aliases=["a-b"]))).decode())
    # An enum may be empty; "" is the null namespace; a dotted name beats "namespace".
    parse('{"type":"enum","name":"E","symbols":[]}')
    parse(orjson.dumps(rec(namespace="")).decode())
    parse(orjson.dumps(rec(name="a.b.R", namespace="1ignored")).decode())
    # A named type may carry a primitive's name inside a namespace.
    parse(orjson.dumps(rec(name="ns.int")).decode())


def test_references_resolve_in_the_enclosing_namespace() -> None:
    inner = {"type": "enum", "name": "E", "symbols": ["A"]}
    top_level = rec(field(inner), field("E", name="b"), namespace="n")
    assert parse(orjson.dumps(top_level).decode()).tree["fields"][1]["type"] == "n.E"
    elsewhere = rec(field({**inner, "namespace": "m"}), field("E", name="b"), namespace="n")
    assert "unknown type 'E' at /fields/1/type" in refusal(elsewhere)


def test_nesting_is_bounded_and_never_a_crash() -> None:
    deep: Any = "int"
    for _ in range(MAX_DEPTH + 1):
        deep = {"type": "array", "items": deep}
    assert f"nested deeper than {MAX_DEPTH} levels at /items/items" in refusal(deep)
    within: Any = "int"
    for _ in range(MAX_DEPTH):
        within = {"type": "array", "items": within}
    parse(orjson.dumps(within).decode())
    # A default nested past what json can print still answers 42201.
    text = '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":'
    text += "[" * 1000 + "]" * 1000 + "}]}"
    with pytest.raises(InvalidSchemaError):
        parse(text)
