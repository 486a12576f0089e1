"""Avro schema compatibility: reader/writer resolution exactly as Java Avro's SchemaCompatibility.

A reader can decode data written with a writer schema when, recursively:

* both have the same type (named types: the same unqualified name, or the writer's full name among
  the reader's aliases; fixed: the same size; enum: every writer symbol in the reader, unless the
  reader has an enum default; record: every reader field is in the writer -- by name or one of the
  reader field's aliases -- with a readable type, or has a default; writer-only fields are skipped);
* or the writer's type promotes to the reader's: int -> long, float, double; long -> float,
  double; float -> double; string <-> bytes;
* or the writer is a union and every branch is readable; or the reader is a union and one of its
  branches reads the (non-union) writer.

Logical types are not considered (as Java). A pair met again while it is being checked -- a
recursive type -- counts as compatible. Each incompatibility carries its kind and the JSON pointer
of the place in the reader schema where it was found.

Levels: BACKWARD checks the new schema reads the latest; FORWARD the latest reads the new; FULL
both; ``*_TRANSITIVE`` against every live version instead of the latest; NONE nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from headwater.registry.schema import NAMED, PRIMITIVES, ParsedSchema, namespace_of, qualify


class Kind(StrEnum):
    """The kinds of incompatibility (Java's ``SchemaIncompatibilityType``)."""

    NAME_MISMATCH = "NAME_MISMATCH"
    FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
    MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
    READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"
    TYPE_MISMATCH = "TYPE_MISMATCH"
    MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"


class Level(StrEnum):
    """Compatibility levels, as the config API names them."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


@dataclass(frozen=True)
class Incompatibility:
    """One reason a reader cannot decode a writer's data."""

    kind: Kind
    location: str
    message: str

    def describe(self, reader: str = "reader", writer: str = "writer") -> str:
        """A sentence for humans, naming the reader and writer as the caller knows them."""
        where = f"at path '{self.location}' in the {reader} schema"
        if self.kind is Kind.READER_FIELD_MISSING_DEFAULT_VALUE:
            return (
                f"The field '{self.message}' {where} has no default value and is missing in "
                f"the {writer} schema"
            )
        if self.kind is Kind.MISSING_ENUM_SYMBOLS:
            return f"The {reader} enum {where} is missing symbols {self.message} of the {writer}"
        if self.kind is Kind.MISSING_UNION_BRANCH:
            return f"The {reader} union {where} has no branch for the {writer}'s {self.message}"
        if self.kind is Kind.NAME_MISMATCH:
            return f"The type name {where} does not match the {writer}'s ({self.message})"
        if self.kind is Kind.FIXED_SIZE_MISMATCH:
            return f"The fixed size {where} does not match the {writer}'s ({self.message})"
        return f"The type {where} does not match the {writer}'s ({self.message})"


@dataclass(frozen=True)
class Finding:
    """An incompatibility found while checking a new schema against one existing version."""

    incompatibility: Incompatibility
    version: int | None
    new_is_reader: bool

    def message(self) -> str:
        """Confluent's verbose message shape, with a description that names old and new."""
        inc = self.incompatibility
        names = ("new", "old") if self.new_is_reader else ("old", "new")
        text = inc.describe(*names).replace("'", "\\'")
        info = inc.message.replace("'", "\\'")
        version = "" if self.version is None else f", oldSchemaVersion: {self.version}"
        return (
            f"{{errorType:'{inc.kind.value}', description:'{text}', "
            f"additionalInfo:'{info}'{version}}}"
        )


def check_reader_writer(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
    """Every incompatibility that stops ``reader`` from decoding data written with ``writer``.

    A named pair met twice is checked once (memoized), so its findings are listed once, at the
    place it was first met (Java repeats them for every place).
    """
    found = _Checker(reader.named, writer.named).check(reader.tree, writer.tree)
    return list(dict.fromkeys(found))


def check(
    new: ParsedSchema, existing: Sequence[tuple[int | None, ParsedSchema]], level: Level
) -> list[Finding]:
    """Check ``new`` against ``existing`` (oldest first) at ``level``; empty means compatible.

    Non-transitive levels look only at the last of ``existing``; transitive levels at all of
    them, newest first, as Confluent does.
    """
    if level is Level.NONE or not existing:
        return []
    targets = list(reversed(existing)) if level.transitive else [existing[-1]]
    findings: list[Finding] = []
    for version, old in targets:
        if level.backward:
            for inc in check_reader_writer(new, old):
                findings.append(Finding(inc, version, new_is_reader=True))
        if level.forward:
            for inc in check_reader_writer(old, new):
                findings.append(Finding(inc, version, new_is_reader=False))
    return findings


_PROMOTIONS = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}
_IN_PROGRESS: list[Incompatibility] = []


class _Resolved(NamedTuple):
    """A schema node with names looked up: its Avro type and its definition."""

    kind: str
    node: Any


class _Checker:
    """One reader/writer comparison; memoizes pairs so recursive types terminate."""

    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}

    def check(self, reader: Any, writer: Any) -> list[Incompatibility]:
        return self._pair(reader, writer, [])

    def _resolve(self, node: Any, named: Mapping[str, Any]) -> _Resolved:
        """The Avro type and definition of a node: names looked up, ``{"type": X}`` unwrapped."""
        while True:
            if isinstance(node, list):
                return _Resolved("union", node)
            if isinstance(node, str):
                if node in PRIMITIVES:
                    return _Resolved(node, node)
                node = named[node]
                continue
            kind = node["type"]
            if isinstance(kind, str) and (
                kind in PRIMITIVES or kind in NAMED or kind in ("array", "map")
            ):
                return _Resolved("record" if kind == "error" else kind, node)
            node = kind

    def _pair(self, reader: Any, writer: Any, location: list[str]) -> list[Incompatibility]:
        r = self._resolve(reader, self.reader_named)
        w = self._resolve(writer, self.writer_named)
        if r.kind in PRIMITIVES and w.kind in PRIMITIVES:
            return self._compare(r, w, location)
        key = (id(r.node), id(w.node))
        found = self.memo.get(key)
        if found is _IN_PROGRESS:
            return []
        if found is not None:
            return found
        self.memo[key] = _IN_PROGRESS
        result = self._compare(r, w, location)
        self.memo[key] = result
        return result

    def _compare(
        self, reader: _Resolved, writer: _Resolved, location: list[str]
    ) -> list[Incompatibility]:
        (r_type, r), (w_type, w) = reader, writer
        if r_type == w_type:
            if r_type in PRIMITIVES:
                return []
            if r_type == "array":
                return self._pair(r["items"], w["items"], [*location, "items"])
            if r_type == "map":
                return self._pair(r["values"], w["values"], [*location, "values"])
            if r_type == "fixed":
                out = self._names(r, w, location)
                if r["size"] != w["size"]:
                    out.append(
                        _at(
                            Kind.FIXED_SIZE_MISMATCH,
                            [*location, "size"],
                            f"expected: {w['size']}, found: {r['size']}",
                        )
                    )
                return out
            if r_type == "enum":
                return self._names(r, w, location) + self._symbols(r, w, location)
            if r_type == "record":
                return self._names(r, w, location) + self._fields(r, w, location)
            # Both unions: every writer branch must be readable by the reader union.
            out = []
            for i, branch in enumerate(w):
                if self._pair(r, branch, [*location, str(i)]):
                    out.append(
                        _at(
                            Kind.MISSING_UNION_BRANCH,
                            [*location, str(i)],
                            f"reader union lacking writer type: {self._type_name(branch, False)}",
                        )
                    )
            return out
        if w_type == "union":
            out = []
            for i, branch in enumerate(w):
                out.extend(self._pair(r, branch, [*location, str(i)]))
            return out
        if r_type == "union":
            for branch in r:
                if not self._pair(branch, w, location):
                    return []
            return [
                _at(
                    Kind.MISSING_UNION_BRANCH,
                    location,
                    f"reader union lacking writer type: {w_type.upper()}",
                )
            ]
        if w_type in _PROMOTIONS.get(r_type, ()):
            return []
        return [
            _at(
                Kind.TYPE_MISMATCH,
                location,
                f"reader type: {r_type.upper()} not compatible with writer type: {w_type.upper()}",
            )
        ]

    def _type_name(self, node: Any, reader: bool) -> str:
        kind, _ = self._resolve(node, self.reader_named if reader else self.writer_named)
        return kind.upper()

    def _names(self, r: Any, w: Any, location: list[str]) -> list[Incompatibility]:
        r_full, w_full = r["name"], w["name"]
        if r_full.rpartition(".")[2] == w_full.rpartition(".")[2]:
            return []
        aliases = {qualify(a, namespace_of(r_full)) for a in r.get("aliases", ())}
        if w_full in aliases:
            return []
        return [_at(Kind.NAME_MISMATCH, [*location, "name"], f"expected: {w_full}")]

    def _symbols(self, r: Any, w: Any, location: list[str]) -> list[Incompatibility]:
        missing = sorted(set(w["symbols"]) - set(r["symbols"]))
        if not missing or r.get("default") in r["symbols"]:
            return []
        return [
            _at(Kind.MISSING_ENUM_SYMBOLS, [*location, "symbols"], "[" + ", ".join(missing) + "]")
        ]

    def _fields(self, r: Any, w: Any, location: list[str]) -> list[Incompatibility]:
        writer_fields = {f["name"]: f for f in w["fields"]}
        out: list[Incompatibility] = []
        for pos, field in enumerate(r["fields"]):
            here = [*location, "fields", str(pos)]
            match = writer_fields.get(field["name"])
            for alias in field.get("aliases", ()):
                if match is not None:
                    break
                match = writer_fields.get(alias)
            if match is None:
                if "default" not in field:
                    out.append(_at(Kind.READER_FIELD_MISSING_DEFAULT_VALUE, here, field["name"]))
                continue
            out.extend(self._pair(field["type"], match["type"], [*here, "type"]))
        return out


def _at(kind: Kind, location: list[str], message: str) -> Incompatibility:
    return Incompatibility(kind, pointer(location), message)


def pointer(location: Sequence[str]) -> str:
    """A JSON pointer (RFC 6901) from path segments; the root is ``/`` as in Java's reports."""
    if not location:
        return "/"
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in location)
