"""A vectorized structural check of Avro payloads: which of many records certainly decode.

The validation job's per-record cost is one fastavro decode per payload. For payloads written
with exactly the expected schema, a decode succeeds if and only if the bytes walk the schema:
every varint ends, every enum index and union branch is in range, every string is valid UTF-8
and the record ends exactly at the payload's end. :func:`compile_check` turns a schema into a
walk over *all* records of a fetch at once (numpy arrays of positions, one step per schema
field, not per record), answering per record "certainly valid" or "not sure".

It is conservative, never the last word on an invalid record: anything it does not accept
(a non-ASCII string, a 10-byte varint, an int outside 32 bits, a byte past the end) is
handed to the exact per-record path (:class:`~headwater_spark.validation.PayloadValidator`),
which gives the verdict and its reason. Schemas it cannot walk column-wise (arrays, maps,
recursive types, logical types, whose decoding can fail on values) get no check (None) and
every record takes the exact path. ``tests/unit/spark/test_avro_check.py`` compares it with
fastavro on valid, truncated, padded and corrupted payloads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Walk = Callable[[np.ndarray, np.ndarray, np.ndarray, "_Buffer"], np.ndarray]
"""``walk(pos, end, ok, buf)``: advance ``pos`` past one value per record; clear ``ok`` where
the value is not certainly valid. Arrays are of one subset of the records."""

_FIXED_SIZES = {"null": 0, "float": 4, "double": 8}


class UnsupportedSchemaError(Exception):
    """The schema has a part the column-wise walk does not handle."""


class _Buffer:
    """The payload bytes (padded so a varint read near the end stays inside) and, made on first
    use, a running count of non-ASCII bytes for the string check."""

    def __init__(self, u: np.ndarray) -> None:
        self.u = u
        self._high: np.ndarray | None = None

    def non_ascii(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        if self._high is None:
            high = np.zeros(len(self.u) + 1, np.int64)
            np.cumsum(self.u >= 0x80, out=high[1:])
            self._high = high
        result: np.ndarray = self._high[stop] - self._high[start]
        return result


def _varint(
    buf: _Buffer, pos: np.ndarray, ok: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at ``pos``: values and sizes; ``ok`` cleared for any of ``width`` bytes
    or more (conservative: fastavro may accept some, the exact path decides)."""
    u = buf.u
    b = u[pos]
    z = (b & 0x7F).astype(np.uint64)
    active = b >= 0x80
    size = np.ones(len(pos), np.int64)
    k = 1
    while active.any():
        if k == width - 1:
            ok &= ~active
            break
        b = u[pos + k]
        z |= np.where(active, b & 0x7F, 0).astype(np.uint64) << np.uint64(7 * k)
        size += active
        active &= b >= 0x80
        k += 1
    value = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    return value, size


def _inside(pos: np.ndarray, end: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Clear ``ok`` where ``pos`` ran past the record and park those positions at its end, so
    later reads stay inside the buffer."""
    over = pos > end
    if over.any():
        ok &= ~over
        pos = np.where(over, end, pos)
    return pos


def _fixed(size: int) -> Walk:
    def walk(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
        return _inside(pos + size, end, ok)

    return walk


def _boolean(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
    ok &= buf.u[pos] <= 1
    return _inside(pos + 1, end, ok)


def _long(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
    _, size = _varint(buf, pos, ok, 10)
    return _inside(pos + size, end, ok)


def _int(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
    value, size = _varint(buf, pos, ok, 6)
    ok &= (value >= -(1 << 31)) & (value < (1 << 31))
    return _inside(pos + size, end, ok)


def _sized(text: bool) -> Walk:
    def walk(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
        length, size = _varint(buf, pos, ok, 10)
        ok &= length >= 0
        start = _inside(pos + size, end, ok)
        stop = _inside(start + np.maximum(length, 0), end, ok)
        if text:
            ok &= buf.non_ascii(start, stop) == 0
        return stop

    return walk


def _enum(count: int) -> Walk:
    def walk(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
        index, size = _varint(buf, pos, ok, 5)
        ok &= (index >= 0) & (index < count)
        return _inside(pos + size, end, ok)

    return walk


def _record(fields: list[Walk]) -> Walk:
    def walk(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
        for field in fields:
            pos = field(pos, end, ok, buf)
        return pos

    return walk


def _union(branches: list[Walk]) -> Walk:
    def walk(pos: np.ndarray, end: np.ndarray, ok: np.ndarray, buf: _Buffer) -> np.ndarray:
        index, size = _varint(buf, pos, ok, 5)
        ok &= (index >= 0) & (index < len(branches))
        pos = _inside(pos + size, end, ok)
        for b, branch in enumerate(branches):
            chosen = ok & (index == b)
            if not chosen.any():
                continue
            sub_ok = ok[chosen]
            pos[chosen] = branch(pos[chosen], end[chosen], sub_ok, buf)
            ok[chosen] = sub_ok
        return pos

    return walk


def _compile(schema: Any, named: dict[str, Any], seen: frozenset[str]) -> Walk:
    if isinstance(schema, list):
        return _union([_compile(s, named, seen) for s in schema])
    if isinstance(schema, str):
        if schema in _FIXED_SIZES:
            return _fixed(_FIXED_SIZES[schema])
        simple = {"boolean": _boolean, "int": _int, "long": _long}
        if schema in simple:
            return simple[schema]
        if schema in ("string", "bytes"):
            return _sized(schema == "string")
        if schema in seen or schema not in named:
            raise UnsupportedSchemaError(f"named type {schema} (recursive or unknown)")
        return _compile(named[schema], named, seen | {schema})
    if not isinstance(schema, dict) or "logicalType" in schema:
        raise UnsupportedSchemaError("logical types decode to values that can fail")
    kind = schema.get("type")
    name = schema.get("name")
    inner = seen | {name} if isinstance(name, str) else seen
    if kind in ("record", "error"):
        return _record([_compile(f["type"], named, inner) for f in schema["fields"]])
    if kind == "enum":
        return _enum(len(schema["symbols"]))
    if kind == "fixed":
        return _fixed(int(schema["size"]))
    if isinstance(kind, str | list | dict) and set(schema) <= {"type"}:
        return _compile(kind, named, seen)
    raise UnsupportedSchemaError(f"type {kind!r}")


class StructureCheck:
    """The compiled walk of one schema over many payloads."""

    def __init__(self, walk: Walk) -> None:
        self._walk = walk

    def certainly_valid(self, u: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per payload ``u[starts[i]:ends[i]]`` (the Avro body, after the frame), whether it
        certainly decodes with the schema, to the last byte. ``u`` needs 10 bytes of padding
        after the last payload."""
        ok = np.ones(len(starts), bool)
        if not len(starts):
            return ok
        pos = self._walk(starts.astype(np.int64), ends.astype(np.int64), ok, _Buffer(u))
        ok &= pos == ends
        return ok


def compile_check(parsed: Any) -> StructureCheck | None:
    """The column-wise check of fastavro's parsed schema ``parsed``, or None where the schema
    has a part it does not handle (arrays, maps, recursive or logical types)."""
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    try:
        return StructureCheck(_compile(parsed, dict(named), frozenset()))
    except (UnsupportedSchemaError, KeyError, TypeError, ValueError):
        return None
