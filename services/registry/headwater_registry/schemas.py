"""Schemas by global id: immutable once stored, so parsed, rendered and cached in this process.

What can never change is cached (bounded, least recently used out): a stored schema by id, its
parsed form, the rendered answers of ``GET /schemas/ids/{id}`` and ``.../schema``, a
fingerprint's id. Subject, version, config and mode state is never cached, so registry processes
sharing one PostgreSQL never serve each other stale subject state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from headwater.registry.errors import InvalidSchemaError, SchemaNotFoundError
from headwater.registry.schema import AVRO, SCHEMA_TYPES, ParsedSchema, SchemaReference, parse
from headwater.types import SchemaId
from headwater_registry import metrics
from headwater_registry.cache import BoundedCache
from headwater_registry.documents import SchemaDocument, SubjectVersion, VersionDocument
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import StoredSchema, Transaction, VersionRow

CACHE_ENTRIES = 100_000
MAX_REFERENCE_DEPTH = 32
# Labelled children looked up once: ``labels()`` validates and locks on every call, a noticeable
# share of a cached read.
_BODY_HITS = metrics.CACHE_HITS.labels("schema_by_id")
_TEXT_HITS = metrics.CACHE_HITS.labels("schema_text")


@dataclass(frozen=True)
class SchemaInput:
    """A schema as a request submits it: text, type and references to other subjects' types."""

    text: str
    schema_type: str | None = None
    references: tuple[SchemaReference, ...] = ()


class Schemas:
    """The schemas of one store, by id and by fingerprint, with what they reference resolved."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store
        # Bounded so a registry with very many schemas keeps a steady footprint; parsed trees
        # are the heaviest entries, so fewer of them are kept.
        self._stored: BoundedCache[int, StoredSchema] = BoundedCache(CACHE_ENTRIES)
        self._parsed: BoundedCache[int, ParsedSchema] = BoundedCache(CACHE_ENTRIES // 10)
        self._bodies: BoundedCache[int, bytes] = BoundedCache(CACHE_ENTRIES)
        self._texts: BoundedCache[int, bytes] = BoundedCache(CACHE_ENTRIES)
        self._ids: BoundedCache[str, SchemaId] = BoundedCache(CACHE_ENTRIES)

    # --- the id reads every deserializer makes --------------------------------------------------

    def prerendered(self, schema_id: int, *, text_only: bool) -> bytes | None:
        """``GET /schemas/ids/{id}`` (``.../schema`` with ``text_only``) from the cache alone.

        None on a miss. The bodies are rendered once per id: ids never change, and rendering
        (a dict, orjson, a response model) cost more than the rest of a cached read.
        """
        body = (self._texts if text_only else self._bodies).get(schema_id)
        if body is not None:
            (_TEXT_HITS if text_only else _BODY_HITS).inc()
        return body

    def render(self, schema_id: int, *, text_only: bool) -> bytes:
        """The answer :meth:`prerendered` missed, read from the store and kept for next time."""
        metrics.CACHE_MISSES.labels("schema_text" if text_only else "schema_by_id").inc()
        with self.store.read() as tx:
            stored = self.stored(tx, schema_id)
        if text_only:
            # The schema itself as compact JSON, as Confluent returns it (not the stored text).
            body = orjson.dumps(orjson.loads(stored.text))
            self._texts.put(schema_id, body)
        else:
            body = orjson.dumps(schema_document(stored))
            self._bodies.put(schema_id, body)
        return body

    def subjects_of(self, schema_id: int, *, deleted: bool) -> list[str]:
        """``GET /schemas/ids/{id}/subjects``."""
        return sorted({v.subject for v in self._versions_of(schema_id, deleted)})

    def versions_of(self, schema_id: int, *, deleted: bool) -> list[SubjectVersion]:
        """``GET /schemas/ids/{id}/versions``."""
        return [
            {"subject": v.subject, "version": v.version}
            for v in self._versions_of(schema_id, deleted)
        ]

    def _versions_of(self, schema_id: int, deleted: bool) -> list[VersionRow]:
        with self.store.read() as tx:
            self.stored(tx, schema_id)
            rows = tx.versions_of_schema(schema_id)
        return [v for v in rows if deleted or not v.deleted]

    # --- what the subject, registration and compatibility modules look up -----------------------

    def stored(self, tx: Transaction, schema_id: int) -> StoredSchema:
        """The schema with this id (40403 if none)."""
        stored = self._stored.get(schema_id)
        if stored is not None:
            return stored
        stored = tx.get_schema(schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        self._stored.put(schema_id, stored)
        return stored

    def version_document(self, tx: Transaction, row: VersionRow) -> VersionDocument:
        """A subject version as Confluent answers it: subject, version, id, the schema's fields."""
        return {
            "subject": row.subject,
            "version": row.version,
            "id": row.schema_id,
            **schema_document(self.stored(tx, row.schema_id)),
        }

    def parsed(self, tx: Transaction, schema_id: int) -> ParsedSchema:
        """The stored schema with this id, parsed (with its references) for compatibility checks."""
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            metrics.CACHE_HITS.labels("parsed_schema").inc()
            return parsed
        metrics.CACHE_MISSES.labels("parsed_schema").inc()
        stored = self.stored(tx, schema_id)
        refs = self._resolve_references(tx, stored.references, 0)
        parsed = parse(stored.text, refs, stored.schema_type)
        self._parsed.put(schema_id, parsed)
        return parsed

    def parse(self, tx: Transaction, schema: SchemaInput) -> ParsedSchema:
        """A submitted schema, validated, with the types its references name resolved."""
        refs = self._resolve_references(tx, schema.references, 0)
        return parse(schema.text, refs, schema.schema_type)

    def find_id(self, tx: Transaction, fingerprint: str) -> SchemaId | None:
        """The id of the schema with this content fingerprint, if one is stored."""
        found = self._ids.get(fingerprint)
        if found is not None:
            metrics.CACHE_HITS.labels("id_by_fingerprint").inc()
            return found
        found = tx.find_schema_id(fingerprint)
        if found is not None:
            # A fingerprint's id never changes once committed; a miss is not cached, because
            # another process may register the schema at any moment.
            self._ids.put(fingerprint, found)
        return found

    def _resolve_references(
        self, tx: Transaction, references: Sequence[SchemaReference], depth: int
    ) -> list[tuple[SchemaReference, ParsedSchema]]:
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchemaError("Invalid schema: references nest too deep (a cycle?)")
        resolved = []
        for ref in references:
            rows = [v for v in tx.versions(ref.subject) if not v.deleted]
            match = [v for v in rows if ref.version in (-1, v.version)]
            if not match:
                raise InvalidSchemaError(
                    f"Invalid schema: reference {ref.name!r} to subject {ref.subject!r} "
                    f"version {ref.version} does not exist"
                )
            stored = self.stored(tx, match[-1].schema_id)
            inner = self._resolve_references(tx, stored.references, depth + 1)
            resolved.append((ref, parse(stored.text, inner, stored.schema_type)))
        return resolved


def schema_document(stored: StoredSchema) -> SchemaDocument:
    """The fields every schema answer carries: schema text, type (unless Avro), references."""
    doc: SchemaDocument = {"schema": stored.text}
    if stored.schema_type != AVRO:
        doc["schemaType"] = stored.schema_type
    if stored.references:
        doc["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in stored.references
        ]
    return doc


def schema_types() -> list[str]:
    """``GET /schemas/types``."""
    return list(SCHEMA_TYPES)
