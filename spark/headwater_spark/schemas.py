"""Which registered schema a key or value should have: subject naming strategies and references.

Confluent's three subject naming strategies decide the subject a payload's schema lives under:

    TopicName        <topic>-key / <topic>-value: one record type per topic (the default)
    RecordName       <record full name>: a record type, whatever topic carries it
    TopicRecordName  <topic>-<record full name>: several record types per topic

A :class:`SchemaResolver` (one per registry URL and Python process, on the driver and on every
executor) turns registered schemas into what decoding and checking need: fastavro's parsed form
with the named types of its references (recursively), and the registry engine's
:class:`~headwater.registry.schema.ParsedSchema` for compatibility checks. Both are cached by
schema id (ids are immutable).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

import fastavro

from headwater.registry.client import RegisteredSchema
from headwater.registry.schema import ParsedSchema, parse
from headwater.registry.serde import named_types
from headwater_spark.registry import SchemaRegistry


class NamingStrategy(StrEnum):
    """Confluent's subject name strategies (the class names without ``Strategy``)."""

    TOPIC_NAME = "TopicName"
    RECORD_NAME = "RecordName"
    TOPIC_RECORD_NAME = "TopicRecordName"

    @classmethod
    def parse(cls, text: str) -> NamingStrategy:
        """``TopicName``, ``TopicNameStrategy`` or Confluent's full class name, any case."""
        name = text.strip().rsplit(".", 1)[-1].removesuffix("Strategy").lower().replace("_", "")
        for strategy in cls:
            if strategy.value.lower() == name:
                return strategy
        raise ValueError(
            f"unknown subject naming strategy {text!r}: use TopicName, RecordName or "
            "TopicRecordName"
        )

    @property
    def per_record_type(self) -> bool:
        return self is not NamingStrategy.TOPIC_NAME


def subject_name(
    strategy: NamingStrategy, topic: str | None, is_key: bool, record_name: str | None
) -> str:
    """The subject a payload's schema is registered under."""
    if strategy is NamingStrategy.TOPIC_NAME:
        if not topic:
            raise ValueError("the TopicName strategy needs a topic")
        return f"{topic}-{'key' if is_key else 'value'}"
    if not record_name:
        raise ValueError(f"the {strategy.value} strategy needs a record name")
    if strategy is NamingStrategy.RECORD_NAME:
        return record_name
    if not topic:
        raise ValueError("the TopicRecordName strategy needs a topic")
    return f"{topic}-{record_name}"


def record_full_name(schema: Any) -> str | None:
    """The full name of a record schema (JSON form), None for any other type."""
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    name = str(schema["name"])
    if "." in name:
        return name
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace else name


@dataclass(frozen=True)
class ResolvedSchema:
    """A registered schema with everything its references bring, ready to decode and check."""

    registered: RegisteredSchema
    parsed: Any  # fastavro's parsed schema; carries the referenced named types
    named: dict[str, Any]  # referenced named types by full name (fastavro's form)
    checked: ParsedSchema  # the registry engine's form, for compatibility checks

    @property
    def schema_id(self) -> int:
        return int(self.registered.schema_id)

    @property
    def json(self) -> Any:
        return json.loads(self.registered.schema_str)

    @property
    def record_name(self) -> str | None:
        return record_full_name(self.json)


class SchemaResolver:
    """Schemas of one registry resolved with their references; cached per process."""

    _instances: ClassVar[dict[str, SchemaResolver]] = {}
    _instances_lock = threading.Lock()

    def __init__(self, url: str) -> None:
        self.registry = SchemaRegistry(url)
        self._by_id: dict[int, ResolvedSchema] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, url: str) -> SchemaResolver:
        with cls._instances_lock:
            found = cls._instances.get(url)
            if found is None:
                found = cls._instances[url] = SchemaResolver(url)
            return found

    def resolve(self, registered: RegisteredSchema) -> ResolvedSchema:
        """Parse ``registered`` with its references (raises on a schema that does not parse)."""
        with self._lock:
            found = self._by_id.get(int(registered.schema_id))
        if found is not None and found.registered.schema_str == registered.schema_str:
            return found
        client = self.registry.client
        named = named_types(client, registered.references)
        parsed = fastavro.parse_schema(json.loads(registered.schema_str), named_schemas=dict(named))
        resolved = ResolvedSchema(registered, parsed, named, self._checked(registered, 0))
        with self._lock:
            self._by_id[int(registered.schema_id)] = resolved
        return resolved

    def _checked(self, registered: RegisteredSchema, depth: int) -> ParsedSchema:
        if depth > 32:
            raise ValueError("schema references nest too deep (a cycle?)")
        dependencies = [
            (
                ref,
                self._checked(
                    self.registry.client.get_version(ref.subject, ref.version), depth + 1
                ),
            )
            for ref in registered.references
        ]
        return parse(registered.schema_str, dependencies, registered.schema_type)

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        return self.registry.by_id(schema_id)

    def subject(self, subject: str, version: int | str = "latest") -> ResolvedSchema:
        return self.resolve(self.registry.version(subject, version))
