"""Differential check: our compatibility verdicts equal Apache Avro's own checker on random schemas.

``avro.compatibility`` is the Apache project's port of Java's SchemaCompatibility. The engine in
``headwater.registry.compatibility`` exists for what that port does not give -- kinds paired with
their JSON-pointer locations, and named types resolved through fastavro from schema references --
so this test pins that both decide compatible / incompatible identically.
"""

from __future__ import annotations

from typing import Any

import avro.schema
import orjson
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.registry.compatibility import check_reader_writer
from headwater.registry.schema import parse

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PRIMITIVE = st.sampled_from(PRIMITIVES)
DEFAULTS = {
    "null": None,
    "boolean": False,
    "int": 1,
    "long": 2,
    "float": 1.5,
    "double": 2.5,
    "bytes": "",
    "string": "s",
}
SYMBOLS = ["A", "B", "C"]


@st.composite
def field_type(draw: st.DrawFn, depth: int, owner: str) -> Any:
    # Named types take their field's name: one per field, the same on the reader and writer side.
    choices = ["primitive", "union", "enum", "fixed"]
    if depth < 2:
        choices += ["array", "map"]
    kind = draw(st.sampled_from(choices))
    if kind == "primitive":
        return draw(PRIMITIVE)
    if kind == "union":
        return draw(st.lists(PRIMITIVE, min_size=1, max_size=3, unique=True))
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=3, unique=True))
        enum: dict[str, Any] = {"type": "enum", "name": f"E{owner}", "symbols": symbols}
        if draw(st.booleans()):
            enum["default"] = symbols[0]
        return enum
    if kind == "fixed":
        return {"type": "fixed", "name": f"F{owner}", "size": draw(st.sampled_from([4, 8]))}
    if kind == "array":
        return {"type": "array", "items": draw(field_type(depth + 1, owner))}
    return {"type": "map", "values": draw(field_type(depth + 1, owner))}


def default_for(t: Any) -> tuple[bool, Any]:
    if isinstance(t, str):
        return True, DEFAULTS[t]
    if isinstance(t, list):
        return True, DEFAULTS[t[0]]
    if t["type"] == "enum":
        return True, t["symbols"][0]
    if t["type"] == "array":
        return True, []
    if t["type"] == "map":
        return True, {}
    return False, None


@st.composite
def record(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4, unique=True))
    fields = []
    for name in names:
        t = draw(field_type(0, name))
        field: dict[str, Any] = {"name": name, "type": t}
        has_default, value = default_for(t)
        if has_default and draw(st.booleans()):
            field["default"] = value
        fields.append(field)
    return {"type": "record", "name": draw(st.sampled_from(["R", "S"])), "fields": fields}


def avro_verdict(reader: str, writer: str) -> bool:
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]  # avro: no hints
    result = checker.get_compatibility(avro.schema.parse(reader), avro.schema.parse(writer))
    return bool(result.compatibility == SchemaCompatibilityType.compatible)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reader=record(), writer=record())
def test_verdicts_match_apache_avro(reader: dict[str, Any], writer: dict[str, Any]) -> None:
    r, w = orjson.dumps(reader).decode(), orjson.dumps(writer).decode()
    ours = not check_reader_writer(parse(r), parse(w))
    assert ours == avro_verdict(r, w)


@settings(max_examples=100, deadline=None)
@given(schema=record())
def test_every_schema_reads_itself(schema: dict[str, Any]) -> None:
    parsed = parse(orjson.dumps(schema).decode())
    assert check_reader_writer(parsed, parsed) == []
