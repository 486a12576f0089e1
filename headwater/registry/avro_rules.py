"""The Avro specification's rules for a schema's declarations, as Java Avro's parser applies them.

fastavro parses leniently (it takes a record named ``1abc`` or a fixed of size ``-1``); Confluent
parses with Java Avro, which refuses them. :func:`check_declarations` walks the submitted JSON
before fastavro sees it and refuses, naming the JSON pointer of the offending place:

* names of records, enums, fixed types and fields, enum symbols and named types' aliases: a
  letter or ``_``, then letters, digits or ``_``. Java tests letters and digits with
  ``Character.isLetter``/``isDigit`` on UTF-16 units, so any BMP letter counts (the spec's
  ``[A-Za-z_]`` is stricter; Java is followed, as Confluent uses it) and a character outside the
  BMP never does. A named type may not be named after a primitive type;
* namespaces: dot-separated names (``""`` is the null namespace);
* fixed sizes: a JSON integer from 0 to 2^31-1 (Java reads it with ``isInt()``);
* enum symbols: names, no duplicates; an enum's default must be one of them;
* records: ``fields`` an array of objects with a name and a type, no duplicate names, ``order``
  one of ascending/descending/ignore (any case, as Java's ``Order.valueOf``);
* aliases: an array of strings (field aliases are not names to Java, so only that);
* type references: primitive, or a named type already defined (here or by a reference), looked
  up in the enclosing namespace first, then the null namespace (fastavro, which parses next,
  does not look in the null one: such a reference is still refused, without a path); ``type``
  inside an object is a string; unions hold no union and no two branches of one type (of one
  full name, for named types);
* defaults, as Java's ``Schema.isValidDefault``: int and long are integers in range, float and
  double any number, bytes, string, enum and fixed are strings, arrays and maps of valid
  values, a record an object with a valid value for each field (missing ones take the field's
  own default), a union a value valid for any branch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.registry.errors import InvalidSchemaError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
MAX_DEPTH = 128
"""Schemas nested deeper are refused: every tool walking them recurses once per level."""
_ORDERS = frozenset({"ASCENDING", "DESCENDING", "IGNORE"})
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
# Java Avro reads float and double defaults given as these strings (JSON has no NaN).
_FLOAT_WORDS = frozenset({"NaN", "Infinity", "-Infinity"})


def check_declarations(schema: Any, known: Mapping[str, Any]) -> None:
    """Refuse ``schema`` (parsed JSON) where Java Avro would; ``known``: referenced named types.

    ``known`` maps full names to definitions in fastavro's parsed form (names fully qualified),
    as references bring them in.
    """
    walk = _Walk(known)
    try:
        walk.schema(schema, "", [], 0)
        for pending in walk.defaults:
            if not walk.valid_default(pending.type, pending.namespace, pending.value, 0):
                raise _invalid(
                    f"default value {_show(pending.value)} of field {pending.field!r} does not "
                    f"match its type {_show(pending.type)}",
                    pending.path,
                )
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deep") from None


def is_valid_name(name: str) -> bool:
    """A simple Avro name as Java's default name validator takes it (see the module docstring)."""
    if not name or not (_is_letter(name[0]) or name[0] == "_"):
        return False
    return all(_is_letter(c) or c == "_" or (c.isdecimal() and c <= "\uffff") for c in name[1:])


def is_valid_namespace(namespace: str) -> bool:
    """Dot-separated names, or ``""`` for the null namespace."""
    return namespace == "" or all(is_valid_name(part) for part in namespace.split("."))


def _is_letter(c: str) -> bool:
    # A character outside the BMP is two UTF-16 units to Java, neither of them a letter.
    return c.isalpha() and c <= "\uffff"


@dataclass(frozen=True)
class _Definition:
    """A named type this schema defines: its JSON and the namespace its references resolve in."""

    node: Mapping[str, Any]
    namespace: str


@dataclass(frozen=True)
class _PendingDefault:
    """A field default, checked once every named type is defined (types may come later)."""

    type: Any
    namespace: str
    value: Any
    field: str
    path: list[str]


class _Walk:
    """One walk over a submitted schema: the named types defined so far, defaults to check."""

    def __init__(self, known: Mapping[str, Any]) -> None:
        self.known = known
        self.defined: dict[str, _Definition] = {}
        self.defaults: list[_PendingDefault] = []

    # --- declarations ---------------------------------------------------------------------------

    def schema(self, node: Any, namespace: str, path: list[str], depth: int) -> str:
        """Check one schema; answer its union key: the full name of a named type, else its type."""
        if depth > MAX_DEPTH:
            raise _invalid(f"nested deeper than {MAX_DEPTH} levels", path)
        if isinstance(node, str):
            return self.reference(node, namespace, path)
        if isinstance(node, list):
            self.union(node, namespace, path, depth)
            return "union"
        if not isinstance(node, dict):
            raise _invalid(f"{_show(node)} is not a schema", path)
        kind = node.get("type")
        if not isinstance(kind, str):
            raise _invalid("an object schema needs a string 'type'", [*path, "type"])
        if kind in PRIMITIVES:
            return kind
        if kind in ("record", "error"):
            return self.record(node, namespace, path, depth)
        if kind == "enum":
            return self.enum(node, namespace, path)
        if kind == "fixed":
            return self.fixed(node, namespace, path)
        if kind == "array":
            self.child(node, "items", namespace, path, depth)
            return kind
        if kind == "map":
            self.child(node, "values", namespace, path, depth)
            return kind
        # Anything else must name a type already defined (fastavro decides what it accepts).
        return self.reference(kind, namespace, [*path, "type"])

    def child(
        self, node: Mapping[str, Any], key: str, namespace: str, path: list[str], depth: int
    ) -> None:
        """An array's ``items`` or a map's ``values``."""
        if key not in node:
            raise _invalid(f"{node['type']} has no '{key}'", path)
        self.schema(node[key], namespace, [*path, key], depth + 1)

    def reference(self, name: str, namespace: str, path: list[str]) -> str:
        """A type named by a string: primitive, or a named type defined before this point."""
        if name in PRIMITIVES:
            return name
        full = self.resolve(name, namespace)
        if full is None:
            raise _invalid(f"unknown type {name!r}", path)
        return full

    def resolve(self, name: str, namespace: str) -> str | None:
        """The full name a reference means: in the enclosing namespace first, then the null one."""
        candidates = (
            [name] if "." in name else [f"{namespace}.{name}", name] if namespace else [name]
        )
        for full in candidates:
            if full in self.defined or full in self.known:
                return full
        return None

    def union(self, node: list[Any], namespace: str, path: list[str], depth: int) -> None:
        seen: set[str] = set()
        for i, branch in enumerate(node):
            here = [*path, str(i)]
            if isinstance(branch, list):
                raise _invalid("a union may not contain a union", here)
            key = self.schema(branch, namespace, here, depth + 1)
            if key in seen:
                raise _invalid(f"duplicate {key!r} in union", here)
            seen.add(key)

    def named(self, node: Mapping[str, Any], namespace: str, path: list[str]) -> tuple[str, str]:
        """Define a named type: its full name and the namespace its own references resolve in."""
        name = node.get("name")
        if not isinstance(name, str):
            raise _invalid(f"a {node['type']} needs a string 'name'", [*path, "name"])
        given = node.get("namespace")
        if given is not None and not isinstance(given, str):
            raise _invalid("namespace must be a string", [*path, "namespace"])
        if "." in name:
            # Java reads ".R" as R in the null namespace; refused here as the spec and Apache's
            # Python parser do, since fastavro would name it ".R".
            space, _, simple = name.rpartition(".")
            if not space:
                raise _invalid(f"name {name!r} has an empty namespace part", [*path, "name"])
            where = [*path, "name"]
        else:
            space, simple = (namespace if given is None else given), name
            where = [*path, "name" if given is None else "namespace"]
        if not is_valid_name(simple):
            raise _invalid(
                f"{node['type']} name {simple!r} is not a valid Avro name", [*path, "name"]
            )
        if not is_valid_namespace(space):
            raise _invalid(f"namespace {space!r} is not dot-separated Avro names", where)
        full = f"{space}.{simple}" if space else simple
        if full in PRIMITIVES:
            raise _invalid(f"a named type may not be named after the primitive {full!r}", where)
        if full in self.defined or full in self.known:
            raise _invalid(f"{full!r} is defined twice", [*path, "name"])
        self.aliases(node, path, space)
        self.defined[full] = _Definition(node, space)
        return full, space

    def aliases(self, node: Mapping[str, Any], path: list[str], namespace: str | None) -> None:
        """``aliases``: strings; a named type's are names too (``namespace`` None: a field's)."""
        if "aliases" not in node:
            return
        aliases = node["aliases"]
        if not isinstance(aliases, list):
            raise _invalid("aliases must be an array", [*path, "aliases"])
        for i, alias in enumerate(aliases):
            here = [*path, "aliases", str(i)]
            if not isinstance(alias, str):
                raise _invalid(f"alias {_show(alias)} is not a string", here)
            if namespace is None:
                continue
            space, _, simple = alias.rpartition(".")
            if not is_valid_name(simple) or not is_valid_namespace(space):
                raise _invalid(f"alias {alias!r} is not a valid Avro name", here)

    def record(self, node: Mapping[str, Any], namespace: str, path: list[str], depth: int) -> str:
        full, space = self.named(node, namespace, path)
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise _invalid(f"record {full} needs a 'fields' array", [*path, "fields"])
        names: set[str] = set()
        for i, field in enumerate(fields):
            here = [*path, "fields", str(i)]
            if not isinstance(field, dict):
                raise _invalid("a field must be an object", here)
            name = field.get("name")
            if not isinstance(name, str) or not is_valid_name(name):
                raise _invalid(
                    f"field name {_show(name)} is not a valid Avro name", [*here, "name"]
                )
            if name in names:
                raise _invalid(f"duplicate field {name!r} in record {full}", [*here, "name"])
            names.add(name)
            if "type" not in field:
                raise _invalid(f"field {name!r} has no type", here)
            order = field.get("order", "ascending")
            if not isinstance(order, str) or order.upper() not in _ORDERS:
                raise _invalid(
                    f"order {_show(order)} is not ascending, descending or ignore", [*here, "order"]
                )
            self.aliases(field, here, None)
            self.schema(field["type"], space, [*here, "type"], depth + 1)
            if "default" in field:
                pending = _PendingDefault(
                    field["type"], space, field["default"], name, [*here, "default"]
                )
                self.defaults.append(pending)
        return full

    def enum(self, node: Mapping[str, Any], namespace: str, path: list[str]) -> str:
        full, _ = self.named(node, namespace, path)
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise _invalid(f"enum {full} needs a 'symbols' array", [*path, "symbols"])
        seen: set[str] = set()
        for i, symbol in enumerate(symbols):
            here = [*path, "symbols", str(i)]
            if not isinstance(symbol, str) or not is_valid_name(symbol):
                raise _invalid(f"enum symbol {_show(symbol)} is not a valid Avro name", here)
            if symbol in seen:
                raise _invalid(f"duplicate enum symbol {symbol!r}", here)
            seen.add(symbol)
        default = node.get("default")
        if "default" in node and not (isinstance(default, str) and default in seen):
            raise _invalid(f"enum default {_show(default)} is not a symbol", [*path, "default"])
        return full

    def fixed(self, node: Mapping[str, Any], namespace: str, path: list[str]) -> str:
        full, _ = self.named(node, namespace, path)
        size = node.get("size")
        if not _is_int(size, (0, _INT_RANGE[1])):
            raise _invalid(
                f"fixed size {_show(size)} is not an integer from 0 to 2^31-1", [*path, "size"]
            )
        return full

    # --- defaults -------------------------------------------------------------------------------

    def valid_default(self, schema: Any, namespace: str, value: Any, depth: int) -> bool:
        """Java's ``isValidDefault``: ``value`` (JSON) is a value of ``schema``."""
        if depth > MAX_DEPTH:
            # Only a record whose fields' defaults need the record again gets here: no finite
            # value has that type.
            return False
        if isinstance(schema, list):
            return any(self.valid_default(b, namespace, value, depth + 1) for b in schema)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return _valid_primitive(schema, value)
            full = self.resolve(schema, namespace)
            if full is None:
                return False
            definition = self.defined.get(full)
            if definition is None:
                # A referenced type, in fastavro's form: names inside it are full names.
                return self.valid_default(
                    self.known[full], full.rpartition(".")[0], value, depth + 1
                )
            return self.valid_default(definition.node, definition.namespace, value, depth + 1)
        kind = schema["type"]
        if kind in PRIMITIVES:
            return _valid_primitive(kind, value)
        if kind in ("enum", "fixed"):
            return isinstance(value, str)
        if kind == "array":
            items = schema["items"]
            return isinstance(value, list) and all(
                self.valid_default(items, namespace, v, depth + 1) for v in value
            )
        if kind == "map":
            values = schema["values"]
            return isinstance(value, dict) and all(
                self.valid_default(values, namespace, v, depth + 1) for v in value.values()
            )
        if kind in ("record", "error"):
            if not isinstance(value, dict):
                return False
            name = schema["name"]
            inner = name.rpartition(".")[0] if "." in name else schema.get("namespace", namespace)
            for field in schema["fields"]:
                if field["name"] in value:
                    given = value[field["name"]]
                elif "default" in field:
                    given = field["default"]
                else:
                    return False
                if not self.valid_default(field["type"], inner or "", given, depth + 1):
                    return False
            return True
        return self.valid_default(kind, namespace, value, depth + 1)


def _valid_primitive(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "int":
        return _is_int(value, _INT_RANGE)
    if kind == "long":
        return _is_int(value, _LONG_RANGE)
    if kind in ("float", "double"):
        if isinstance(value, str):
            return value in _FLOAT_WORDS
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)  # bytes, string


def _is_int(value: Any, bounds: tuple[int, int]) -> bool:
    # A JSON integer: 1.0 is a float to Jackson too, and a bool is no number.
    return type(value) is int and bounds[0] <= value <= bounds[1]


def _invalid(what: str, path: list[str]) -> InvalidSchemaError:
    return InvalidSchemaError(f"Invalid schema: {what} at {pointer(path)}")


def pointer(path: Sequence[str]) -> str:
    """A JSON pointer (RFC 6901) into the submitted schema; the root is ``/``."""
    if not path:
        return "/"
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in path)


def _show(value: Any) -> str:
    """A value for a message, cut short: messages echo what was sent, within reason."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
