"""Avro schemas as the registry holds them: parsing with references, identity text, normal form.

A schema has two texts, each hashed into an indexed column of the store so a lookup never scans
versions:

* the *identity text*: the submitted JSON with insignificant whitespace removed. Two submissions
  with the same identity text (and references) are the same schema and share one global id.
* the *normal form* (``normalize=true``): names fully qualified, no ``namespace`` keys, a fixed key
  order, sorted aliases and properties, ``{"type": "int"}`` collapsed to ``"int"``. Docs, aliases,
  defaults and logical types are kept, because they change what readers see.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import orjson

from headwater.registry.errors import InvalidSchemaError, SchemaTooLargeError

AVRO = "AVRO"
SCHEMA_TYPES = (AVRO,)
PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
MAX_SCHEMA_BYTES = 1 << 20


@dataclass(frozen=True)
class SchemaReference:
    """A named type another subject's version defines (Confluent's ``{name, subject, version}``)."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, eq=False)
class ParsedSchema:
    """A validated Avro schema: its parsed tree, every named type it can see, and its texts.

    ``tree`` is fastavro's parsed form (names fully qualified, each named type expanded where it is
    first defined and referred to by full name afterwards); ``named`` maps full names to their
    definitions, including the types brought in by references.
    """

    text: str
    tree: Any
    named: Mapping[str, Any]
    references: tuple[SchemaReference, ...] = ()
    schema_type: str = AVRO
    _normal: list[str] = field(default_factory=list, repr=False)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.schema_type, self.text, self.references)

    @property
    def normalized_text(self) -> str:
        if not self._normal:
            self._normal.append(orjson.dumps(normalize(self.tree)).decode())
        return self._normal[0]

    @property
    def normalized_fingerprint(self) -> str:
        return fingerprint(self.schema_type, self.normalized_text, self.references)

    def normalized(self) -> ParsedSchema:
        """The same schema with its normal form as its text."""
        return ParsedSchema(
            self.normalized_text, self.tree, self.named, self.references, self.schema_type
        )


def fingerprint(schema_type: str, text: str, references: Sequence[SchemaReference]) -> str:
    """SHA-256 over type, text and references: the indexed key of a schema's content."""
    refs = orjson.dumps([r.to_dict() for r in references]).decode()
    return hashlib.sha256(f"{schema_type}\n{text}\n{refs}".encode()).hexdigest()


def parse(
    text: str,
    references: Sequence[tuple[SchemaReference, ParsedSchema]] = (),
    schema_type: str | None = None,
) -> ParsedSchema:
    """Validate ``text`` as an Avro schema that may use the named types of ``references``.

    Raises :class:`InvalidSchemaError` saying what is wrong: bad JSON, unknown type, bad name,
    a default that does not match its field's type, an unsupported schema type.
    """
    kind = (schema_type or AVRO).upper()
    if kind not in SCHEMA_TYPES:
        raise InvalidSchemaError(f"Unsupported schema type {schema_type!r}: this registry is Avro")
    if len(text) > MAX_SCHEMA_BYTES:
        raise SchemaTooLargeError(f"Schema is larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise InvalidSchemaError(f"Invalid schema: not JSON: {e}") from None
    named: dict[str, Any] = {}
    for _ref, dependency in references:
        named.update(dependency.named)
    try:
        tree = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False)
    except Exception as e:  # fastavro raises several unrelated types for bad schemas
        raise InvalidSchemaError(f"Invalid schema: {type(e).__name__}: {e}") from None
    _check_extra(tree, named)
    return ParsedSchema(
        orjson.dumps(raw).decode(), tree, named, tuple(r for r, _ in references), kind
    )


def _check_extra(node: Any, named: Mapping[str, Any]) -> None:
    """Rules fastavro leaves to the writer but Java's parser enforces: enum defaults, unions."""
    if isinstance(node, list):
        seen: set[str] = set()
        for branch in node:
            if isinstance(branch, list):
                raise InvalidSchemaError("Invalid schema: a union may not contain a union")
            key = _branch_key(branch, named)
            if key in seen:
                raise InvalidSchemaError(f"Invalid schema: duplicate {key!r} in union")
            seen.add(key)
            _check_extra(branch, named)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "enum" and "default" in node and node["default"] not in node.get("symbols", ()):
        raise InvalidSchemaError(
            f"Invalid schema: enum {node['name']} default {node['default']!r} is not a symbol"
        )
    if kind in ("record", "error"):
        names = [f["name"] for f in node.get("fields", ())]
        if len(set(names)) != len(names):
            raise InvalidSchemaError(f"Invalid schema: duplicate field name in {node['name']}")
        for f in node.get("fields", ()):
            _check_extra(f["type"], named)
    elif kind == "array":
        _check_extra(node["items"], named)
    elif kind == "map":
        _check_extra(node["values"], named)
    elif isinstance(kind, dict | list):
        _check_extra(kind, named)


def _branch_key(branch: Any, named: Mapping[str, Any]) -> str:
    # Unions may hold one schema per unnamed type and any number of distinct named types.
    if isinstance(branch, str):
        return branch
    kind = branch.get("type")
    if kind in NAMED:
        return str(branch["name"])
    if isinstance(kind, str):
        return kind
    return _branch_key(kind, named)


def namespace_of(full_name: str) -> str:
    return full_name.rpartition(".")[0]


def qualify(name: str, namespace: str) -> str:
    """An alias or name as a full name: unqualified names take the enclosing namespace."""
    return name if "." in name or not namespace else f"{namespace}.{name}"


_INTERNAL = frozenset({"namespace"})
_RECORD_KEYS = ("type", "name", "doc", "aliases", "fields")
_ENUM_KEYS = ("type", "name", "doc", "aliases", "symbols", "default")
_FIXED_KEYS = ("type", "name", "doc", "aliases", "size")
_FIELD_KEYS = ("name", "type", "doc", "default", "order", "aliases")


def normalize(node: Any) -> Any:
    """The normal form of a parsed schema tree (see the module docstring)."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [normalize(branch) for branch in node]
    kind = node.get("type")
    if isinstance(kind, dict | list):
        return normalize(kind)
    if kind in PRIMITIVES or (isinstance(kind, str) and kind not in NAMED | {"array", "map"}):
        props = _props(node, ("type",))
        return {"type": kind, **props} if props else kind
    if kind in ("record", "error"):
        out = _ordered(node, _RECORD_KEYS)
        out["fields"] = [_normalize_field(f) for f in node["fields"]]
    elif kind == "enum":
        out = _ordered(node, _ENUM_KEYS)
    elif kind == "fixed":
        out = _ordered(node, _FIXED_KEYS)
    elif kind == "array":
        out = {"type": "array", "items": normalize(node["items"])}
        keys: tuple[str, ...] = ("type", "items")
        return {**out, **_props(node, keys)}
    else:
        out = {"type": "map", "values": normalize(node["values"])}
        return {**out, **_props(node, ("type", "values"))}
    if "aliases" in out:
        out["aliases"] = sorted(qualify(a, namespace_of(node["name"])) for a in out["aliases"])
    keys = _RECORD_KEYS if kind in ("record", "error") else _ENUM_KEYS + _FIXED_KEYS
    return {**out, **_props(node, keys)}


def _normalize_field(f: Mapping[str, Any]) -> dict[str, Any]:
    out = _ordered(f, _FIELD_KEYS)
    out["type"] = normalize(f["type"])
    if "aliases" in out:
        out["aliases"] = sorted(out["aliases"])
    return {**out, **_props(f, _FIELD_KEYS)}


def _ordered(node: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: node[k] for k in keys if k in node}


def _props(node: Mapping[str, Any], known: Sequence[str]) -> dict[str, Any]:
    return {
        k: node[k]
        for k in sorted(node)
        if k not in known and k not in _INTERNAL and not k.startswith("__")
    }
