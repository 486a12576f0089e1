"""Executor side of the validation job: verdicts of records, as Arrow, and their counts.

What the driver decides (:class:`Expectation`: which schema each record's value, and optionally
key, should have) is plain picklable data; everything here runs inside Spark tasks
(``mapInArrow``, the fused source's ``read``) and builds its registry client and validators
there, cached per Python worker so schema caches outlive tasks.

A record's verdict combines its value's and its key's: valid when both are; otherwise the
value's reason, or the key's prefixed ``KEY_`` (``KEY_BAD_FRAMING``, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type stubs
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from headwater_spark.avro_types import converter, spark_type
from headwater_spark.registry import RegisteredSchema
from headwater_spark.schemas import NamingStrategy, ResolvedSchema, SchemaResolver
from headwater_spark.source import SOURCE_SCHEMA
from headwater_spark.validation import INVALID, VALID, PayloadValidator, Verdict

KEY_PREFIX = "KEY_"


@dataclass(frozen=True)
class Expectation:
    """The schema(s) one part of every record (``value`` or ``key``) should have.

    ``single`` with the TopicName strategy; ``by_name`` (record full name -> schema) with the
    record-name strategies, where a topic may carry several record types.
    """

    part: str
    strategy: NamingStrategy
    single: RegisteredSchema | None = None
    by_name: dict[str, RegisteredSchema] = field(default_factory=dict)

    @property
    def cache_key(self) -> tuple[Any, ...]:
        if self.single is not None:
            return (self.part, int(self.single.schema_id))
        return (self.part, tuple(sorted((n, int(r.schema_id)) for n, r in self.by_name.items())))

    def describe(self) -> str:
        if self.single is not None:
            s = self.single
            return f"{s.subject} v{s.version} (id {s.schema_id})"
        return ", ".join(
            f"{r.subject} v{r.version} (id {r.schema_id})" for _, r in sorted(self.by_name.items())
        )

    def resolved(self, resolver: SchemaResolver) -> list[tuple[str | None, ResolvedSchema]]:
        if self.single is not None:
            return [(None, resolver.resolve(self.single))]
        return [(name, resolver.resolve(r)) for name, r in sorted(self.by_name.items())]

    def data_type(self, resolver: SchemaResolver) -> DataType:
        """The decoded ``data`` column: the expected record, or one field per record type."""
        resolved = self.resolved(resolver)
        if self.single is not None:
            return spark_type(resolved[0][1].json, resolved[0][1].named)[0]
        return StructType(
            [
                StructField(type_field(name or ""), spark_type(r.json, r.named)[0], True)
                for name, r in resolved
            ]
        )


def type_field(record_name: str) -> str:
    """A record type's column in the multi-type ``data`` struct (dots are not column names)."""
    return record_name.replace(".", "_")


_validators: dict[tuple[Any, ...], PayloadValidator] = {}


def cached_validator(registry_url: str, expectation: Expectation) -> PayloadValidator:
    """One validator per (registry, expectation) per Python worker: its caches outlive tasks."""
    key = (registry_url, *expectation.cache_key)
    validator = _validators.get(key)
    if validator is None:
        resolver = SchemaResolver.of(registry_url)
        expected: RegisteredSchema | dict[str, RegisteredSchema] = (
            expectation.single if expectation.single is not None else expectation.by_name
        )
        validator = PayloadValidator(expected, resolver.by_id, resolver.resolve)
        _validators[key] = validator
    return validator


COUNT_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("outcome", StringType(), False),
        StructField("reason", StringType(), True),
        StructField("schema_id", IntegerType(), True),
        StructField("n", LongType(), False),
        StructField("first", LongType(), False),
        StructField("last", LongType(), False),
        StructField("message", StringType(), True),
    ]
)
"""Partial counts: records of one (topic, partition, outcome, reason, writer schema id) with
their offset span and, for invalid ones, the message of the first (the summary's sample)."""

_COUNT_ARROW = to_arrow_schema(COUNT_SCHEMA)

ValueColumns = tuple[bytes, np.ndarray, np.ndarray]
"""Values as one buffer (10 bytes of padding after the last), their starts and lengths (-1:
null): what the fused read has before any ``bytes`` object is made."""


def combined_reasons(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    value_validator: PayloadValidator,
    key_validator: PayloadValidator | None,
    columns: ValueColumns | None = None,
) -> tuple[list[str | None], list[int | None]]:
    """Each record's reason (None: valid) and value writer schema id; ``columns`` (the values'
    buffer, starts and lengths) lets the validator check them column-wise."""
    if columns is None:
        reasons, ids = value_validator.reasons_and_ids(values)
    else:
        reasons, ids = value_validator.reasons_and_ids_columns(values, *columns)
    out: list[str | None] = list(reasons)
    if key_validator is not None and keys is not None:
        key_reasons = key_validator.reasons(keys)
        for i, key_reason in enumerate(key_reasons):
            if key_reason is not None and out[i] is None:
                out[i] = KEY_PREFIX + key_reason
    return out, list(ids)


def count_rows(
    topic: str,
    partition: int,
    offsets: Sequence[int],
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    value_validator: PayloadValidator,
    key_validator: PayloadValidator | None,
    columns: ValueColumns | None = None,
) -> pa.RecordBatch:
    """Verdicts of one partition's records as :data:`COUNT_SCHEMA` rows."""
    reasons, ids = combined_reasons(values, keys, value_validator, key_validator, columns)
    groups: dict[tuple[str | None, int | None], list[int]]
    if reasons.count(None) == len(reasons) and len(set(ids)) == 1:
        # The common batch: all valid, one writer schema: one row, no per-record pass.
        groups = {(None, ids[0]): [len(offsets), min(offsets), max(offsets), 0]}
    else:
        groups = {}
        for i, (reason, sid, offset) in enumerate(zip(reasons, ids, offsets, strict=True)):
            group = groups.get((reason, sid))
            if group is None:
                groups[(reason, sid)] = [1, offset, offset, i]
            else:
                group[0] += 1
                if offset < group[1]:
                    group[1] = offset
                if offset > group[2]:
                    group[2] = offset
    keys_ = list(groups)
    messages = [
        None
        if reason is None
        else _message(
            reason, groups[(reason, sid)][3], values, keys, value_validator, key_validator
        )
        for reason, sid in keys_
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * len(keys_), pa.string()),
            pa.array([partition] * len(keys_), pa.int32()),
            pa.array([VALID if r is None else INVALID for r, _ in keys_], pa.string()),
            pa.array([r for r, _ in keys_], pa.string()),
            pa.array([sid for _, sid in keys_], pa.int32()),
            pa.array([groups[k][0] for k in keys_], pa.int64()),
            pa.array([groups[k][1] for k in keys_], pa.int64()),
            pa.array([groups[k][2] for k in keys_], pa.int64()),
            pa.array(messages, pa.string()),
        ],
        schema=_COUNT_ARROW,
    )


def _message(
    reason: str,
    index: int,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    value_validator: PayloadValidator,
    key_validator: PayloadValidator | None,
) -> str | None:
    # The slow path, once per invalid group: the first record's full verdict.
    if reason.startswith(KEY_PREFIX) and key_validator is not None and keys is not None:
        return "key: " + (key_validator.validate(keys[index]).message or "")
    return value_validator.validate(values[index]).message


def count_verdicts(
    registry_url: str, value: Expectation, key: Expectation | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a streaming run with no record outputs: counts out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        value_validator = cached_validator(registry_url, value)
        key_validator = None if key is None else cached_validator(registry_url, key)
        for batch in batches:
            if not batch.num_rows:
                continue
            # A micro-batch's Arrow batch may mix partitions: count each on its own.
            table = pa.Table.from_batches([batch])
            topics = table.column("topic").to_pylist()
            partitions = table.column("partition").to_pylist()
            offsets = table.column("offset").to_pylist()
            values = table.column("value").to_pylist()
            keys = table.column("key").to_pylist() if key is not None else None
            spans: dict[tuple[str, int], list[int]] = {}
            for i, tp in enumerate(zip(topics, partitions, strict=True)):
                spans.setdefault(tp, []).append(i)
            for (topic, partition), rows in spans.items():
                yield count_rows(
                    topic,
                    partition,
                    [offsets[i] for i in rows],
                    [values[i] for i in rows],
                    None if keys is None else [keys[i] for i in rows],
                    value_validator,
                    key_validator,
                )

    return run


VERDICT_COLUMNS = ("outcome", "reason", "message", "schema_id", "data")


def output_schema(passthrough: Iterable[str], data_type: DataType | None) -> StructType:
    """The validation step's rows: the ``passthrough`` source columns, the verdict, and (when an
    output stores decoded records) ``data``."""
    fields = [SOURCE_SCHEMA[name] for name in passthrough]
    fields += [
        StructField("outcome", StringType(), False),
        StructField("reason", StringType(), True),
        StructField("message", StringType(), True),
        StructField("schema_id", IntegerType(), True),
    ]
    if data_type is not None:
        fields.append(StructField("data", data_type, True))
    return StructType(fields)


def validate_batches(
    registry_url: str, value: Expectation, key: Expectation | None, output: StructType
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: source rows in, their verdicts out (:func:`output_schema`).

    Turning decoded records into Arrow structs is a good part of the per-record cost, so
    ``data`` is built only when ``output`` has it.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        resolver = SchemaResolver.of(registry_url)
        value_validator = cached_validator(registry_url, value)
        key_validator = None if key is None else cached_validator(registry_url, key)
        arrow_schema = to_arrow_schema(output, timezone="UTC")
        passthrough = [f.name for f in output.fields if f.name not in VERDICT_COLUMNS]
        keep_data = "data" in arrow_schema.names
        data_type = arrow_schema.field("data").type if keep_data else None
        converters: dict[str | None, Any] = {}
        if keep_data:
            converters = {name: converter(r.json, r.named) for name, r in value.resolved(resolver)}
        validate = value_validator.validate
        for batch in batches:
            values = batch.column("value").to_pylist()
            if not values:
                continue
            verdicts: list[Verdict] = [validate(v) for v in values]
            reasons: list[str | None] = [v.reason for v in verdicts]
            messages: list[str | None] = [v.message for v in verdicts]
            if key_validator is not None:
                for i, k in enumerate(batch.column("key").to_pylist()):
                    if reasons[i] is None:
                        key_verdict = key_validator.validate(k)
                        if key_verdict.reason is not None:
                            reasons[i] = KEY_PREFIX + key_verdict.reason
                            messages[i] = f"key: {key_verdict.message}"
            columns = [
                batch.column(name).cast(arrow_schema.field(name).type) for name in passthrough
            ]
            columns += [
                pa.array([VALID if r is None else INVALID for r in reasons], pa.string()),
                pa.array(reasons, pa.string()),
                pa.array(messages, pa.string()),
                pa.array([v.schema_id for v in verdicts], pa.int32()),
            ]
            if keep_data:
                columns.append(
                    pa.array(
                        _data(verdicts, reasons, value, value_validator, converters), data_type
                    )
                )
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)

    return run


def _data(
    verdicts: Sequence[Verdict],
    reasons: Sequence[str | None],
    value: Expectation,
    validator: PayloadValidator,
    converters: dict[str | None, Any],
) -> list[Any]:
    if value.single is not None:
        convert = converters.get(None)
        records = [v.record if r is None else None for v, r in zip(verdicts, reasons, strict=True)]
        return records if convert is None else [None if d is None else convert(d) for d in records]
    out: list[Any] = []
    for verdict, reason in zip(verdicts, reasons, strict=True):
        if reason is not None:
            out.append(None)
            continue
        name = validator.expected_name(verdict.schema_id)
        convert = converters.get(name)
        record = verdict.record if convert is None else convert(verdict.record)
        out.append({type_field(name or ""): record})
    return out


def expected_json(expectation: Expectation) -> str:
    """An expectation as an option string (options are strings), for the fused source."""

    def one(r: RegisteredSchema) -> dict[str, Any]:
        return {
            "id": int(r.schema_id),
            "schema": r.schema_str,
            "schemaType": r.schema_type,
            "references": [ref.to_dict() for ref in r.references],
            "subject": r.subject,
            "version": r.version,
        }

    return json.dumps(
        {
            "part": expectation.part,
            "strategy": expectation.strategy.value,
            "single": None if expectation.single is None else one(expectation.single),
            "byName": {n: one(r) for n, r in expectation.by_name.items()},
        }
    )


def parse_expected_json(text: str) -> Expectation:
    from headwater.registry.schema import SchemaReference
    from headwater.types import SchemaId

    raw = json.loads(text)

    def one(d: dict[str, Any]) -> RegisteredSchema:
        return RegisteredSchema(
            SchemaId(d["id"]),
            d["schema"],
            d.get("schemaType") or "AVRO",
            tuple(SchemaReference(**ref) for ref in d.get("references") or ()),
            subject=d.get("subject"),
            version=d.get("version"),
        )

    return Expectation(
        raw["part"],
        NamingStrategy(raw["strategy"]),
        None if raw["single"] is None else one(raw["single"]),
        {n: one(d) for n, d in raw["byName"].items()},
    )
