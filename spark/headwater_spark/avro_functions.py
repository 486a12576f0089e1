"""Confluent-framed Avro as DataFrame columns: from_confluent_avro and to_confluent_avro.

What ABRiS and Databricks' ``from_avro(..., schemaRegistryAddress)`` offer, in Python::

    from headwater_spark.avro_functions import from_confluent_avro, to_confluent_avro

    orders = df.select(from_confluent_avro("value", registry, topic="orders").alias("order"))
    back = orders.select(to_confluent_avro("order", registry, topic="orders").alias("value"))

The schema is chosen on the driver when the column is built: by ``schema_id``, by ``subject``
(``version`` "latest" or a number), or by the subject naming strategy (``TopicName``,
``RecordName``, ``TopicRecordName``) from ``topic``, ``is_key`` and ``record_name``. Schema
references are resolved (recursively). Decoding reads each payload with its own writer schema (by
the id in its 5-byte header, looked up once per id and worker) and resolves it into the chosen
reader schema, checked compatible by the registry's own rules first. ``mode``: ``FAILFAST`` (the
default, as Spark's ``from_avro``) fails the task on the first payload that is not valid, naming
why; ``PERMISSIVE`` gives null for it.

Both are Arrow UDFs (``pyspark.sql.functions.arrow_udf``): Spark hands each Python worker Arrow
arrays and takes Arrow arrays back, so no per-row Python objects cross to the JVM; the per-row
work left is fastavro's decode or encode.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark.sql import Column
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DataType

from headwater.registry.client import RegisteredSchema
from headwater_spark.avro_types import converter, spark_type
from headwater_spark.schemas import NamingStrategy, ResolvedSchema, SchemaResolver, subject_name
from headwater_spark.validation import PayloadValidator

MODES = ("FAILFAST", "PERMISSIVE")


class AvroDecodeError(ValueError):
    """A payload ``from_confluent_avro`` cannot decode in FAILFAST mode (the task fails)."""


def _chosen(
    registry_url: str,
    subject: str | None,
    version: int | str,
    schema_id: int | None,
    topic: str | None,
    is_key: bool,
    naming_strategy: str,
    record_name: str | None,
) -> RegisteredSchema:
    """The registered schema a column function uses (driver)."""
    resolver = SchemaResolver.of(registry_url)
    if schema_id is not None:
        found = resolver.by_id(schema_id)
        if found is None:
            raise ValueError(f"schema id {schema_id} is not in the registry at {registry_url}")
        return found
    if subject is None:
        strategy = NamingStrategy.parse(naming_strategy)
        subject = subject_name(strategy, topic, is_key, record_name)
    return resolver.registry.version(subject, version)


def _mode(mode: str) -> str:
    upper = mode.strip().upper()
    if upper not in MODES:
        raise ValueError(f"mode must be FAILFAST or PERMISSIVE, not {mode!r}")
    return upper


def from_confluent_avro(
    data: Column | str,
    registry_url: str,
    *,
    subject: str | None = None,
    version: int | str = "latest",
    schema_id: int | None = None,
    topic: str | None = None,
    is_key: bool = False,
    naming_strategy: str = "TopicName",
    record_name: str | None = None,
    mode: str = "FAILFAST",
) -> Column:
    """Decode a BINARY column of Confluent-framed Avro into a column of the reader schema's
    Spark type (a STRUCT for a record), as described in the module docstring."""
    failfast = _mode(mode) == "FAILFAST"
    reader = _chosen(
        registry_url, subject, version, schema_id, topic, is_key, naming_strategy, record_name
    )
    resolved = SchemaResolver.of(registry_url).resolve(reader)
    data_type, _ = spark_type(resolved.json, resolved.named)
    arrow_type = to_arrow_type(data_type, timezone="UTC")
    decode = _decoder(registry_url, reader, arrow_type, failfast)

    def from_avro(values: pa.Array) -> pa.Array:
        return decode(values)

    return _udf(from_avro, data_type)(data)


def _udf(function: Callable[[Any], Any], data_type: DataType) -> Callable[[Any], Column]:
    # pyspark's overloads type only atomic and array return types; a STRUCT is valid at runtime.
    wrapped: Callable[[Any], Column] = arrow_udf(function, data_type)  # type: ignore[call-overload]
    return wrapped


_validators: dict[tuple[str, int], PayloadValidator] = {}


def _decoder(
    registry_url: str, reader: RegisteredSchema, arrow_type: Any, failfast: bool
) -> Callable[[pa.Array], pa.Array]:
    """The executor side of :func:`from_confluent_avro` (picklable: plain values captured)."""
    key = (registry_url, int(reader.schema_id))

    def decode(values: pa.Array) -> pa.Array:
        validator = _validators.get(key)
        resolver = SchemaResolver.of(registry_url)
        if validator is None:
            validator = _validators[key] = PayloadValidator(
                reader, resolver.by_id, resolver.resolve
            )
        resolved = resolver.resolve(reader)
        convert = converter(resolved.json, resolved.named)
        validate = validator.validate
        out: list[Any] = []
        append = out.append
        for value in values.to_pylist():
            if value is None:
                append(None)  # a null column value stays null, as in Spark's from_avro
                continue
            verdict = validate(value)
            if verdict.reason is not None:
                if failfast:
                    raise AvroDecodeError(
                        f"{verdict.reason}: {verdict.message} (mode FAILFAST; use "
                        "mode='PERMISSIVE' to get null instead)"
                    )
                append(None)
                continue
            record = verdict.record
            append(record if convert is None else convert(record))
        return pa.array(out, arrow_type)

    return decode


def to_confluent_avro(
    data: Column | str,
    registry_url: str,
    *,
    subject: str | None = None,
    version: int | str = "latest",
    schema_id: int | None = None,
    topic: str | None = None,
    is_key: bool = False,
    naming_strategy: str = "TopicName",
    record_name: str | None = None,
) -> Column:
    """Encode a column (a STRUCT matching a record schema, or a primitive) as Confluent-framed
    Avro with the chosen registered schema: ``0x00``, its id (4 bytes, big-endian), the datum.

    The schema must already be registered (as with ABRiS' ``usingSchemaRegistry`` without
    auto-registration), so producers and the registry agree on ids. A value that does not fit
    the schema fails the task, naming the schema and the problem.
    """
    writer = _chosen(
        registry_url, subject, version, schema_id, topic, is_key, naming_strategy, record_name
    )
    encode = _encoder(registry_url, writer)

    def to_avro(values: pa.Array) -> pa.Array:
        return encode(values)

    return _udf(to_avro, _binary_type())(data)


def _binary_type() -> DataType:
    from pyspark.sql.types import BinaryType

    return BinaryType()


def _encoder(registry_url: str, writer: RegisteredSchema) -> Callable[[pa.Array], pa.Array]:
    def encode(values: pa.Array) -> pa.Array:
        resolved = SchemaResolver.of(registry_url).resolve(writer)
        header = struct.pack(">bI", 0, int(writer.schema_id))
        to_avro = _avro_shape(resolved)
        write = fastavro.schemaless_writer
        parsed = resolved.parsed
        out: list[bytes | None] = []
        for value in values.to_pylist():
            if value is None:
                out.append(None)
                continue
            buf = io.BytesIO()
            buf.write(header)
            try:
                write(buf, parsed, to_avro(value))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise ValueError(
                    f"value does not fit schema id {writer.schema_id} ({writer.subject} "
                    f"v{writer.version}): {exc}"
                ) from exc
            out.append(buf.getvalue())
        return pa.array(out, pa.binary())

    return encode


def _avro_shape(resolved: ResolvedSchema) -> Callable[[Any], Any]:
    """Undo :mod:`~headwater_spark.avro_types`' JSON strings for unions of several types (the
    only Spark shapes fastavro cannot write directly)."""
    json_fields = _json_union_fields(resolved.json)
    if not json_fields:
        return lambda value: value

    def shape(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = dict(value)
        for name in json_fields:
            if isinstance(out.get(name), str):
                out[name] = json.loads(out[name])
        return out

    return shape


def _json_union_fields(schema: Any) -> list[str]:
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return []
    names = []
    for field in schema.get("fields", ()):
        kind = field["type"]
        if isinstance(kind, list) and len([b for b in kind if b != "null"]) > 1:
            names.append(field["name"])
    return names
