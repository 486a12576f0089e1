"""Mapping an Avro schema to Spark SQL types, and fastavro's decoded values to matching ones.

Runs on the driver (the output schema of the validation step) and on executors (converting each
decoded record before it becomes an Arrow row). Mapping::

    boolean int long float double bytes string   -> the Spark type of the same name
    enum -> STRING, fixed -> BINARY, array -> ARRAY, map -> MAP<STRING, _>, record -> STRUCT
    union of null and one type -> that type, nullable
    logical date -> DATE, timestamp-millis/micros -> TIMESTAMP, local-timestamp-* -> TIMESTAMP_NTZ,
    decimal (precision <= 38) -> DECIMAL(p, s), uuid -> STRING, time-* -> STRING (ISO time)
    anything else (unions of several types, recursive records) -> STRING holding the value as JSON

Values need converting only where the mapping changes their Python shape (JSON strings, times);
:func:`converter` returns None when a value can be used as fastavro decoded it.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

Converter = Callable[[Any], Any]

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
    "null": StringType(),  # a null-only field: always null; STRING because Parquet has no NULL type
}


class _Names:
    """Named types seen so far on the current path, to spot recursion and resolve references."""

    def __init__(self) -> None:
        self.defined: dict[str, Any] = {}
        self.open: set[str] = set()


def _seeded(named: Mapping[str, Any] | None) -> _Names:
    names = _Names()
    names.defined.update(named or {})
    return names


def spark_type(schema: Any, named: Mapping[str, Any] | None = None) -> tuple[DataType, bool]:
    """``(type, nullable)`` for an Avro schema (JSON form, as parsed by ``json.loads``);
    ``named`` holds named types its references bring (full name -> definition)."""
    return _spark(schema, _seeded(named), None)


def _full_name(schema: dict[str, Any], namespace: str | None) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _resolve(schema: Any, names: _Names, namespace: str | None) -> Any:
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        return names.defined.get(full, names.defined.get(schema, schema))
    return schema


def _spark(schema: Any, names: _Names, namespace: str | None) -> tuple[DataType, bool]:
    schema = _resolve(schema, names, namespace)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], schema == "null"
        return StringType(), True  # a named type on its own path: recursion -> JSON
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            inner, _ = _spark(branches[0], names, namespace)
            return inner, True
        return StringType(), "null" in schema
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical is not None:
        mapped = _logical(schema, logical)
        if mapped is not None:
            return mapped, False
    if kind in ("record", "error"):
        full = _full_name(schema, namespace)
        if full in names.open:
            return StringType(), True
        names.defined[full] = schema
        names.open.add(full)
        inner_ns = full.rpartition(".")[0] or None
        fields = []
        for field in schema["fields"]:
            ftype, nullable = _spark(field["type"], names, inner_ns)
            fields.append(StructField(field["name"], ftype, nullable))
        names.open.discard(full)
        return StructType(fields), False
    if kind == "enum":
        names.defined[_full_name(schema, namespace)] = schema
        return StringType(), False
    if kind == "fixed":
        names.defined[_full_name(schema, namespace)] = schema
        return BinaryType(), False
    if kind == "array":
        item, nullable = _spark(schema["items"], names, namespace)
        return ArrayType(item, nullable), False
    if kind == "map":
        value, nullable = _spark(schema["values"], names, namespace)
        return MapType(StringType(), value, nullable), False
    return _spark(kind, names, namespace)


def _logical(schema: dict[str, Any], logical: str) -> DataType | None:
    kind = schema["type"]
    if logical == "date" and kind == "int":
        return DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return TimestampNTZType()
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema.get("precision", 0))
        if 0 < precision <= 38:
            return DecimalType(precision, int(schema.get("scale", 0)))
        return None
    if logical == "uuid" and kind == "string":
        return StringType()
    if logical in ("time-millis", "time-micros"):
        return StringType()
    return None


def converter(schema: Any, named: Mapping[str, Any] | None = None) -> Converter | None:
    """A function making a fastavro-decoded value fit :func:`spark_type`, None if none is needed."""
    return _converter(schema, _seeded(named), None)


def _converter(schema: Any, names: _Names, namespace: str | None) -> Converter | None:
    schema = _resolve(schema, names, namespace)
    if isinstance(schema, str):
        return None if schema in _PRIMITIVES else _to_json
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            inner = _converter(branches[0], names, namespace)
            return None if inner is None else (lambda v: None if v is None else inner(v))
        return _to_json
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical in ("time-millis", "time-micros"):
        return lambda v: v.isoformat() if isinstance(v, dt.time) else v
    if logical == "uuid":
        return lambda v: str(v) if isinstance(v, uuid.UUID) else v
    if logical == "decimal" and _logical(schema, logical) is None:
        return None
    if kind in ("record", "error"):
        full = _full_name(schema, namespace)
        if full in names.open:
            return _to_json
        names.defined[full] = schema
        names.open.add(full)
        inner_ns = full.rpartition(".")[0] or None
        fields = [(f["name"], _converter(f["type"], names, inner_ns)) for f in schema["fields"]]
        names.open.discard(full)
        if all(conv is None for _, conv in fields):
            return None
        convs = [(name, conv) for name, conv in fields if conv is not None]

        def record(value: dict[str, Any]) -> dict[str, Any]:
            out = dict(value)
            for name, conv in convs:
                out[name] = conv(out.get(name))
            return out

        return record
    if kind in ("enum", "fixed"):
        names.defined[_full_name(schema, namespace)] = schema
        return None
    if kind == "array":
        item = _converter(schema["items"], names, namespace)
        return None if item is None else (lambda v: [item(x) for x in v])
    if kind == "map":
        inner_value = _converter(schema["values"], names, namespace)
        return (
            None if inner_value is None else (lambda v: {k: inner_value(x) for k, x in v.items()})
        )
    return _converter(kind, names, namespace)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _to_json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=_json_default, sort_keys=True)
