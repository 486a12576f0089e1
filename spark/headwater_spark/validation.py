"""Validating one Confluent-framed Avro payload against a subject's expected schema.

The checks, in order, and the stable reason code each failure gets::

    BAD_FRAMING          no value, fewer than 5 bytes, or first byte is not the magic 0x00
    UNKNOWN_SCHEMA_ID    the 4-byte big-endian schema id is not in the registry
    UNSUPPORTED_SCHEMA   the writer schema is not Avro (PROTOBUF, JSON) or does not parse
    DECODE_ERROR         the payload does not decode with its writer schema (truncated, garbage,
                         invalid UTF-8, bytes left after the record)
    INVALID_RECORD       it decodes, but carries a value the schema does not allow: an enum symbol
                         or union branch index outside the schema, or a value the expected schema
                         cannot take under Avro resolution
    INCOMPATIBLE_SCHEMA  it was written with a schema the expected schema cannot read (Avro
                         resolution: a reader field without default missing from the writer, a
                         type that does not promote, missing enum symbols, ...)
    UNEXPECTED_RECORD_TYPE  (RecordName / TopicRecordName strategies) the writer schema's record
                         type has no expected schema: no subject for it in this topic

With the TopicName strategy there is one expected schema; with the record-name strategies
(:mod:`headwater_spark.schemas`) there is one per record type, chosen by the full name of the
writer schema's record, so a topic may carry several record types.

Compatibility of a (writer, expected) pair is decided once, by the registry's engine
(:mod:`headwater.registry.compatibility`), and cached, so the per-record work of
a compatible pair is one fastavro decode with resolution into the expected schema; a writer equal
to the expected schema decodes without resolution. Fields present, types and enum symbols valid
follow from the decode: a record that decodes under resolution has every expected field (from the
writer or its default) with a value of the expected type.

Pure: the registry is reached through the ``lookup`` and ``resolve`` callables, so this runs on
executors (cached HTTP lookups, references fetched) and in unit tests (a dict, no references).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, cast

import fastavro
import numpy as np
from fastavro import _read_py

from headwater.registry.compatibility import check_reader_writer
from headwater.registry.schema import parse
from headwater.types import SchemaId
from headwater_spark.avro_check import StructureCheck, compile_check
from headwater_spark.registry import RegisteredSchema
from headwater_spark.schemas import ResolvedSchema

_read = fastavro.schemaless_reader
_UNSET = object()
_new_tuple = tuple.__new__

try:
    # fastavro's compiled schemaless_reader is a thin wrapper: per call it re-enters
    # parse_schema for both schemas, builds fresh named-schema and option dicts, then calls
    # _read_data. For a (writer, reader) pair seen before, the job does that set-up once
    # (:func:`_prepare`) and calls _read_data itself: the same decode, ~30% less per record.
    # tests/unit/test_spark_validation.py checks both give equal records and errors.
    from fastavro._read import _default_named_schemas, _read_data  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - another fastavro build: the public call, set up per call

    def _read_data(fo: Any, writer: Any, named: Any, reader: Any, options: Any) -> Any:
        return _read(fo, writer, reader)

    def _default_named_schemas() -> dict[str, dict[str, Any]]:
        return {"writer": {}, "reader": {}}


# schemaless_reader's defaults, as the dict it passes to _read_data.
_OPTIONS = {
    "return_record_name": False,
    "return_record_name_override": False,
    "handle_unicode_errors": "strict",
    "return_named_type": False,
    "return_named_type_override": False,
}


def _prepare(writer: Any, reader: Any) -> tuple[Any, Any, Any]:
    """``(writer, named schemas, reader)`` as fastavro's schemaless_reader prepares them on each
    call, prepared once for a pair of parsed schemas."""
    if writer == reader:
        reader = None  # as schemaless_reader does: no resolution between equal schemas
    named = _default_named_schemas()
    writer = fastavro.parse_schema(writer, named["writer"])
    if reader:
        reader = fastavro.parse_schema(reader, named["reader"])
    return writer, named, reader


def _whole(buf: io.BytesIO, writer: Any, named: Any, size: int) -> bool:
    """Whether the payload in ``buf`` (positioned after the frame) decodes exactly, with nothing
    left over, under the writer schema alone; ``buf`` is left back at the frame's end.

    Resolution into another schema *skips* fields the reader does not have, and fastavro's skip
    does not check for the end of the buffer, so a payload cut short inside such a field would
    pass. Decoding with the writer's own schema reads every byte (a second decode, paid only
    for writer schemas that differ from the expected one).
    """
    _read_data(buf, writer, named, None, _OPTIONS)
    whole = buf.tell() == size
    buf.seek(FRAME_SIZE)
    return whole


class Reason(StrEnum):
    """Why a record is invalid; the strings are stable (dead-letter headers, summaries)."""

    BAD_FRAMING = "BAD_FRAMING"
    UNKNOWN_SCHEMA_ID = "UNKNOWN_SCHEMA_ID"
    UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"
    DECODE_ERROR = "DECODE_ERROR"
    INVALID_RECORD = "INVALID_RECORD"
    INCOMPATIBLE_SCHEMA = "INCOMPATIBLE_SCHEMA"
    UNEXPECTED_RECORD_TYPE = "UNEXPECTED_RECORD_TYPE"


VALID = "valid"
INVALID = "invalid"

MAGIC = 0
# Confluent wire format:
#   offset  size  field
#   0       1     magic byte, 0x00
#   1       4     schema id, big-endian unsigned
#   5       ...   Avro binary encoding of the value
_FRAME = struct.Struct(">bI")
FRAME_SIZE = _FRAME.size


class Verdict(NamedTuple):
    """One payload's outcome: ``reason`` None means valid; ``record`` is the decoded value.

    A NamedTuple rather than a frozen dataclass: one is built per record, and tuple creation is
    several times cheaper.
    """

    reason: Reason | None
    message: str | None
    schema_id: SchemaId | None
    record: Any = None


@dataclass(frozen=True, slots=True)
class _Writer:
    """What is known about one writer schema id relative to the expected schema."""

    parsed: Any
    reader: Any  # the schema to resolve into (None: same as the writer, no resolution)
    compatible: bool
    problem: str
    expected_name: str | None = None  # the record type it was checked against (record strategies)


SchemaLookup = Callable[[int], RegisteredSchema | None]
Resolve = Callable[[RegisteredSchema], ResolvedSchema]


def resolve_plain(registered: RegisteredSchema) -> ResolvedSchema:
    """A schema without references, parsed without a registry (unit tests, simple setups)."""
    if registered.references:
        raise ValueError(f"schema id {registered.schema_id} has references: resolve it with them")
    parsed = fastavro.parse_schema(json.loads(registered.schema_str))
    return ResolvedSchema(registered, parsed, {}, parse(registered.schema_str))


class PayloadValidator:
    """Validates payloads against the expected schema(s); caches per writer schema id.

    ``expected`` is one schema (the TopicName strategy) or, for the record-name strategies, the
    expected schema per record full name.
    """

    def __init__(
        self,
        expected: RegisteredSchema | Mapping[str, RegisteredSchema],
        lookup: SchemaLookup,
        resolve: Resolve = resolve_plain,
    ) -> None:
        candidates = [expected] if isinstance(expected, RegisteredSchema) else expected.values()
        for candidate in candidates:
            if candidate.schema_type.upper() != "AVRO":
                raise ValueError(f"expected schema must be Avro, not {candidate.schema_type}")
        self._resolve = resolve
        self._single: ResolvedSchema | None = None
        self._by_name: dict[str, ResolvedSchema] = {}
        if isinstance(expected, RegisteredSchema):
            self._single = resolve(expected)
            self.expected = expected
            self.expected_parsed = self._single.parsed
        else:
            self._by_name = {name: resolve(r) for name, r in expected.items()}
        self._lookup = lookup
        self._writers: dict[int, _Writer | Verdict] = {}
        # frame -> (writer, named schemas, reader, schema id) of a compatible writer seen before
        self._compatible: dict[bytes, tuple[Any, Any, Any, SchemaId]] = {}
        self._check: object = _UNSET  # the expected schema's structure check, made on first use

    def _writer(self, schema_id: int) -> _Writer | Verdict:
        known = self._writers.get(schema_id)
        if known is not None:
            return known
        found = self._lookup(schema_id)
        entry: _Writer | Verdict
        sid = SchemaId(schema_id)
        if found is None:
            entry = Verdict(
                Reason.UNKNOWN_SCHEMA_ID, f"schema id {schema_id} is not in the registry", sid
            )
        elif found.schema_type.upper() != "AVRO":
            entry = Verdict(
                Reason.UNSUPPORTED_SCHEMA,
                f"schema id {schema_id} is {found.schema_type}, not AVRO",
                sid,
            )
        else:
            try:
                writer = self._resolve(found)
            except Exception as exc:  # any parse failure makes the schema unusable
                entry = Verdict(
                    Reason.UNSUPPORTED_SCHEMA, f"schema id {schema_id} does not parse: {exc}", sid
                )
            else:
                entry = self._pair(schema_id, writer)
        self._writers[schema_id] = entry
        return entry

    def _expected_for(self, writer: ResolvedSchema) -> ResolvedSchema | Verdict:
        if self._single is not None:
            return self._single
        name = writer.record_name
        expected = self._by_name.get(name or "")
        if expected is None:
            return Verdict(
                Reason.UNEXPECTED_RECORD_TYPE,
                f"writer schema id {writer.schema_id} is record type {name or '(not a record)'}, "
                f"which has no expected schema here (expected types: {sorted(self._by_name)})",
                SchemaId(writer.schema_id),
            )
        return expected

    def _pair(self, schema_id: int, writer: ResolvedSchema) -> _Writer | Verdict:
        expected = self._expected_for(writer)
        if isinstance(expected, Verdict):
            return expected
        name = None if self._single is not None else expected.record_name
        if schema_id == expected.schema_id:
            return _Writer(writer.parsed, None, True, "", name)
        # The registry's own engine (Java Avro's SchemaCompatibility rules), shared via headwater/.
        problems = check_reader_writer(expected.checked, writer.checked)
        if not problems:
            return _Writer(writer.parsed, expected.parsed, True, "", name)
        details = "; ".join(p.describe("expected", "writer") for p in problems[:5])
        return _Writer(
            writer.parsed,
            None,
            False,
            f"writer schema id {schema_id} is not readable as expected schema id "
            f"{expected.schema_id}: {details}",
            name,
        )

    def expected_name(self, schema_id: int | None) -> str | None:
        """The record type a valid payload of ``schema_id`` was decoded as (record strategies)."""
        known = None if schema_id is None else self._writers.get(schema_id)
        return known.expected_name if isinstance(known, _Writer) else None

    def validate(self, value: bytes | None) -> Verdict:
        """The verdict for one record value (the record's bytes, framing included)."""
        if value is not None:
            # Hot path: the 5-byte frame of a compatible writer seen before, a clean decode.
            known = self._compatible.get(value[:FRAME_SIZE])
            if known is not None:
                writer, named, reader, sid = known
                buf = io.BytesIO(value)
                buf.seek(FRAME_SIZE)
                try:
                    if reader is not None and not _whole(buf, writer, named, len(value)):
                        return self._validate(value)
                    record = _read_data(buf, writer, named, reader, _OPTIONS)
                except Exception:  # classified by the full path below
                    return self._validate(value)
                if buf.tell() == len(value):
                    # tuple.__new__ skips the NamedTuple's Python-level constructor.
                    return _new_tuple(Verdict, (None, None, sid, record))
        return self._validate(value)

    def reasons(self, values: Iterable[bytes | None]) -> list[Reason | None]:
        """Only the reason (None: valid) of each value: :meth:`validate` without building a
        verdict or keeping the decoded record, for runs that count outcomes."""
        return self.reasons_and_ids(values)[0]

    def reasons_and_ids(
        self, values: Iterable[bytes | None]
    ) -> tuple[list[Reason | None], list[SchemaId | None]]:
        """The reason (None: valid) and writer schema id of each value.

        The same checks in the same order as :meth:`validate`; the hot path is inlined because
        at a few microseconds per record the method call and the verdict tuple are a noticeable
        share.
        """
        out: list[Reason | None] = []
        ids: list[SchemaId | None] = []
        append = out.append
        append_id = ids.append
        compatible = self._compatible
        read = _read_data
        options = _OPTIONS
        new_buffer = io.BytesIO
        for value in values:
            if value is not None:
                known = compatible.get(value[:FRAME_SIZE])
                if known is not None:
                    buf = new_buffer(value)
                    buf.seek(FRAME_SIZE)
                    try:
                        if known[2] is not None and not _whole(buf, known[0], known[1], len(value)):
                            verdict = self._validate(value)
                            append(verdict.reason)
                            append_id(verdict.schema_id)
                            continue
                        read(buf, known[0], known[1], known[2], options)
                    except Exception:  # classified by the full path below
                        verdict = self._validate(value)
                        append(verdict.reason)
                        append_id(verdict.schema_id)
                        continue
                    if buf.tell() == len(value):
                        append(None)
                        append_id(known[3])
                        continue
            verdict = self._validate(value)
            append(verdict.reason)
            append_id(verdict.schema_id)
        return out, ids

    def reasons_and_ids_columns(
        self,
        values: Sequence[bytes | None],
        data: bytes,
        starts: np.ndarray,
        lengths: np.ndarray,
    ) -> tuple[list[Reason | None], list[SchemaId | None]]:
        """:meth:`reasons_and_ids` of ``values``, which are ``data[starts[i]:][:lengths[i]]``
        (length -1: None), with the payloads framed with the expected schema's own id checked
        all at once by the column-wise structure check (:mod:`headwater_spark.avro_check`).

        A payload written with the expected schema itself decodes exactly when its bytes walk
        the schema, which the check decides for all of them in a few numpy steps per field; a
        payload it does not certainly accept, and every payload of another writer schema, takes
        the per-record path, so the verdicts and reasons are those of :meth:`reasons_and_ids`.
        ``data`` needs 10 bytes of padding after the last payload.
        """
        check = self._structure_check()
        n = len(values)
        if check is None or not n:
            return self.reasons_and_ids(values)
        expected_id = self.expected.schema_id
        u = np.frombuffer(data, np.uint8)
        framed = lengths >= FRAME_SIZE
        at = np.where(framed, starts, 0)
        frame_id = (
            (u[at + 1].astype(np.int64) << 24)
            | (u[at + 2].astype(np.int64) << 16)
            | (u[at + 3].astype(np.int64) << 8)
            | u[at + 4].astype(np.int64)
        )
        ok = framed & (u[at] == MAGIC) & (frame_id == int(expected_id))
        if ok.any():
            ok[ok] = check.certainly_valid(u, starts[ok] + FRAME_SIZE, (starts + lengths)[ok])
        rest = np.flatnonzero(~ok).tolist()
        if not rest:
            return [None] * n, [expected_id] * n
        reasons: list[Reason | None] = [None] * n
        ids: list[SchemaId | None] = [expected_id] * n
        rest_reasons, rest_ids = self.reasons_and_ids([values[i] for i in rest])
        for i, reason, sid in zip(rest, rest_reasons, rest_ids, strict=True):
            reasons[i] = reason
            ids[i] = sid
        return reasons, ids

    def _structure_check(self) -> StructureCheck | None:
        """The column-wise check of the expected schema (TopicName strategy only), or None."""
        if self._single is None:
            return None
        if self._check is _UNSET:
            self._check = compile_check(self._single.parsed)
        return cast("StructureCheck | None", self._check)

    def _validate(self, value: bytes | None) -> Verdict:
        if value is None:
            return Verdict(Reason.BAD_FRAMING, "record has no value (a tombstone)", None)
        if len(value) < FRAME_SIZE:
            return Verdict(
                Reason.BAD_FRAMING,
                f"value is {len(value)} bytes, shorter than the {FRAME_SIZE}-byte frame",
                None,
            )
        magic, schema_id = _FRAME.unpack_from(value)
        if magic != MAGIC:
            return Verdict(
                Reason.BAD_FRAMING, f"magic byte is 0x{value[0]:02x}, expected 0x00", None
            )
        writer = self._writer(schema_id)
        if isinstance(writer, Verdict):
            return writer
        sid = SchemaId(schema_id)
        buf = io.BytesIO(value)
        buf.seek(FRAME_SIZE)
        try:
            if writer.reader is not None:
                # See _whole: decode with the writer's own schema first, so nothing is skipped.
                _read(buf, writer.parsed, None)
                left = len(value) - buf.tell()
                if left:
                    return Verdict(Reason.DECODE_ERROR, f"{left} bytes left after the record", sid)
                buf.seek(FRAME_SIZE)
            record = _read(buf, writer.parsed, writer.reader)
        except IndexError:
            return _classify_index_error(value, writer, sid)
        except fastavro.read.SchemaResolutionError as exc:
            return Verdict(
                Reason.INVALID_RECORD, f"not readable as the expected schema: {exc}", sid
            )
        except Exception as exc:  # fastavro raises EOFError, UnicodeDecodeError, ValueError...
            return Verdict(Reason.DECODE_ERROR, _decode_message(exc), sid)
        left = len(value) - buf.tell()
        if left:
            return Verdict(Reason.DECODE_ERROR, f"{left} bytes left after the record", sid)
        if not writer.compatible:
            return Verdict(Reason.INCOMPATIBLE_SCHEMA, writer.problem, sid)
        self._compatible[value[:FRAME_SIZE]] = (*_prepare(writer.parsed, writer.reader), sid)
        return Verdict(None, None, sid, record)


def _classify_index_error(value: bytes, writer: _Writer, sid: SchemaId) -> Verdict:
    """Tell a value the schema does not allow from a truncated payload.

    fastavro's compiled reader raises IndexError for both an enum symbol / union branch index out
    of range and a buffer that ends early; its pure-Python reader (slow, used only here, on the
    rare failing record) raises EOFError for the latter, which separates them.
    """
    try:
        _read_py.schemaless_reader(io.BytesIO(value[FRAME_SIZE:]), writer.parsed, writer.reader)
    except EOFError:
        return Verdict(Reason.DECODE_ERROR, _decode_message(EOFError()), sid)
    except IndexError:
        return Verdict(
            Reason.INVALID_RECORD,
            "an enum symbol or union branch index is outside the schema",
            sid,
        )
    except Exception as exc:  # anything else the slow reader finds is a decoding failure
        return Verdict(Reason.DECODE_ERROR, _decode_message(exc), sid)
    return Verdict(Reason.DECODE_ERROR, "payload does not decode with its writer schema", sid)


def _decode_message(exc: Exception) -> str:
    if isinstance(exc, EOFError):
        return "payload ends before the record does (truncated)"
    text = str(exc) or type(exc).__name__
    return f"payload does not decode with its writer schema: {text[:200]}"
