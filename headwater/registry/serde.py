"""Avro serializer and deserializer for the Confluent wire format, with the topic-name strategy.

Wire format of a serialized key or value (the same bytes Confluent's serializers write)::

    offset  size  field
    0       1     magic byte, always 0x00
    1       4     schema id, unsigned big-endian (the registry's global id)
    5       ...   the datum in Avro binary encoding, written with that schema

Subjects follow the topic-name strategy: ``<topic>-value`` for values, ``<topic>-key`` for keys.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import fastavro
import orjson

from headwater.registry.client import SchemaRegistryClient
from headwater.registry.errors import RegistryError
from headwater.registry.schema import SchemaReference
from headwater.types import SchemaId

MAGIC = 0
_HEADER = struct.Struct(">bI")


class SerializationError(RegistryError):
    """The bytes are not in the Confluent wire format, or the datum does not fit its schema."""

    error_code = 50005
    http_status = 500


def topic_subject(topic: str, is_key: bool = False) -> str:
    """The subject of a topic's keys or values under the topic-name strategy."""
    return f"{topic}-{'key' if is_key else 'value'}"


def encode(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload


class WireHeader(NamedTuple):
    """The schema id of wire-format bytes and the Avro payload after it."""

    schema_id: SchemaId
    payload: memoryview


def decode_header(data: bytes) -> WireHeader:
    """The schema id and Avro payload of wire-format bytes; :class:`SerializationError` if
    malformed."""
    if len(data) < _HEADER.size:
        raise SerializationError(f"Message of {len(data)} bytes is too short for the wire format")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError(f"Unknown magic byte {magic}: not the Confluent wire format")
    return WireHeader(SchemaId(schema_id), memoryview(data)[_HEADER.size :])


class AvroSerializer:
    """Serializes datums with one writer schema into the Confluent wire format.

    Contract: the schema's id is resolved once per subject -- registered when ``auto_register``
    (the default, as Confluent's), otherwise looked up and required to exist -- and cached.
    ``references`` name registered versions whose named types the schema uses; they are fetched
    once, here. ``serializer(datum, topic)`` returns the wire bytes.
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema_str: str,
        *,
        references: Sequence[SchemaReference] = (),
        auto_register: bool = True,
        is_key: bool = False,
        normalize: bool = False,
    ) -> None:
        self.client = client
        self.schema_str = schema_str
        self.references = tuple(references)
        self.auto_register = auto_register
        self.is_key = is_key
        self.normalize = normalize
        named = named_types(client, self.references)
        self._parsed = fastavro.parse_schema(orjson.loads(schema_str), named_schemas=named)
        self._ids: dict[str, SchemaId] = {}
        self._lock = threading.Lock()

    def schema_id(self, topic: str) -> SchemaId:
        subject = topic_subject(topic, self.is_key)
        with self._lock:
            found = self._ids.get(subject)
        if found is not None:
            return found
        if self.auto_register:
            found = self.client.register_schema(
                subject, self.schema_str, self.references, normalize=self.normalize
            )
        else:
            found = self.client.lookup_schema(subject, self.schema_str, self.references).schema_id
        with self._lock:
            self._ids[subject] = found
        return found

    def __call__(self, datum: Any, topic: str) -> bytes:
        schema_id = self.schema_id(topic)
        out = io.BytesIO()
        out.write(_HEADER.pack(MAGIC, schema_id))
        try:
            fastavro.schemaless_writer(out, self._parsed, datum)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SerializationError(f"Datum does not match the schema: {e}") from e
        return out.getvalue()


class AvroDeserializer:
    """Reads Confluent wire-format bytes: looks up the writer schema by id (cached), decodes.

    Contract: with ``reader_schema`` the datum is resolved into it by Avro's schema resolution
    (so a consumer can read older or newer writers' data); without, it is returned as written.
    """

    def __init__(self, client: SchemaRegistryClient, reader_schema: str | None = None) -> None:
        self.client = client
        self._reader = (
            None if reader_schema is None else fastavro.parse_schema(orjson.loads(reader_schema))
        )
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _writer(self, schema_id: SchemaId) -> Any:
        with self._lock:
            found = self._writers.get(schema_id)
        if found is None:
            registered = self.client.get_schema(schema_id)
            named = named_types(self.client, registered.references)
            found = fastavro.parse_schema(orjson.loads(registered.schema_str), named_schemas=named)
            with self._lock:
                self._writers[schema_id] = found
        return found

    def __call__(self, data: bytes, topic: str | None = None) -> Any:
        schema_id, payload = decode_header(data)
        writer = self._writer(schema_id)
        try:
            return fastavro.schemaless_reader(io.BytesIO(payload), writer, self._reader)
        except (ValueError, TypeError, EOFError, StopIteration) as e:
            raise SerializationError(f"Cannot decode with schema {schema_id}: {e}") from e


def named_types(
    client: SchemaRegistryClient, references: Sequence[SchemaReference], depth: int = 0
) -> dict[str, Any]:
    """The named types of referenced versions (and theirs, recursively), parsed by fastavro."""
    if depth > 32:
        raise SerializationError("Schema references nest too deep (a cycle?)")
    named: dict[str, Any] = {}
    for ref in references:
        version = client.get_version(ref.subject, ref.version)
        named.update(named_types(client, version.references, depth + 1))
        fastavro.parse_schema(orjson.loads(version.schema_str), named_schemas=named)
    return named
