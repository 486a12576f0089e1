"""Differential check: we accept exactly the declarations Apache Avro's Python parser accepts.

Confluent judges schemas with Java Avro. Apache's Python parser follows the same specification
and agrees with Java on record, enum and fixed names and namespaces (ASCII ones: Java also takes
any BMP letter, the Python parser only ``[A-Za-z_]``), enum symbols, fixed sizes that fit an int,
field order, unknown type names, unions and redefined names -- so random schemas over exactly
those must be accepted or refused by both. What the Python parser does not check (field names,
aliases, defaults) or reads differently (a fixed size of ``true``) is left out here and pinned by
``test_avro_rules.py``.
"""

from __future__ import annotations

import warnings
from typing import Any

import avro.errors
import avro.schema
import orjson
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from headwater.registry.errors import InvalidSchemaError
from headwater.registry.schema import parse

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
# Type names: the primitives and near misses of them.
TYPE_NAMES = st.sampled_from([*PRIMITIVES, "Int", "strin", "integer", ""])
# Names: mostly valid, then anything ASCII that tends to break a rule (digits first, dashes,
# dots, spaces, empty parts).
NAMES = st.one_of(
    st.sampled_from(["R", "_r", "a1", "Rec_2", "int", "ns.R", "x.y.Z"]),
    st.text(alphabet="aZ_1-. ", max_size=5),
)
# Not "": the Python parser lets a nested type's empty namespace inherit the enclosing one,
# where Java (and the spec) put the type in the null namespace.
NAMESPACES = st.one_of(
    st.none(),
    st.sampled_from(["com.acme", "a_1.b", "1ns", "a..b", "a.", ".a", "a-b"]),
    st.text(alphabet="ab_1.-", min_size=1, max_size=6),
)
SYMBOLS = st.one_of(st.sampled_from(["A", "B", "_c", "d1"]), st.text(alphabet="Ab1_- ", max_size=3))
SIZES = st.one_of(
    st.integers(min_value=-3, max_value=64),
    st.sampled_from(["8", 1.0, 2.5, None]),
)
ORDERS = st.sampled_from(["ascending", "descending", "ignore", "up", "", 1])


@st.composite
def named_fields(draw: st.DrawFn, node: dict[str, Any]) -> dict[str, Any]:
    name = draw(NAMES)
    if name:
        node["name"] = name
    namespace = draw(NAMESPACES)
    if namespace is not None:
        node["namespace"] = namespace
    return node


@st.composite
def schemas(draw: st.DrawFn, depth: int = 0) -> Any:
    kinds = ["primitive", "enum", "fixed", "union"]
    if depth < 2:
        kinds += ["record", "array", "map"]
    kind = draw(st.sampled_from(kinds))
    if kind == "primitive":
        name = draw(TYPE_NAMES)
        return name if draw(st.booleans()) else {"type": name}
    if kind == "union":
        return draw(st.lists(TYPE_NAMES, min_size=1, max_size=3))
    if kind == "enum":
        symbols = draw(st.lists(SYMBOLS, max_size=4))
        return draw(named_fields({"type": "enum", "symbols": symbols}))
    if kind == "fixed":
        node: dict[str, Any] = {"type": "fixed"}
        size = draw(SIZES)
        if size is not None:
            node["size"] = size
        return draw(named_fields(node))
    if kind == "array":
        return {"type": "array", "items": draw(schemas(depth + 1))}
    if kind == "map":
        return {"type": "map", "values": draw(schemas(depth + 1))}
    fields = []
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        field: dict[str, Any] = {"name": f"f{i}", "type": draw(schemas(depth + 1))}
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            field["order"] = draw(ORDERS)
        fields.append(field)
    return draw(named_fields({"type": "record", "fields": fields}))


def avro_accepts(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            avro.schema.parse(text)
        except (avro.errors.AvroException, avro.errors.SchemaParseException, TypeError):
            return False
    return True


def we_accept(text: str) -> bool:
    try:
        parse(text)
    except InvalidSchemaError:
        return False
    return True


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_acceptance_matches_apache_avro(schema: Any) -> None:
    text = orjson.dumps(schema).decode()
    assert we_accept(text) == avro_accepts(text), text


def test_the_generator_reaches_both_verdicts() -> None:
    # Guards the test above against a generator that only ever makes valid (or invalid) schemas.
    quick = settings(max_examples=500, database=None)
    accepted = find(schemas(), lambda s: we_accept(orjson.dumps(s).decode()), settings=quick)
    refused = find(schemas(), lambda s: not we_accept(orjson.dumps(s).decode()), settings=quick)
    assert avro_accepts(orjson.dumps(accepted).decode())
    assert not avro_accepts(orjson.dumps(refused).decode())
