"""The registry's domain core: subjects, versions, global ids, config, mode and compatibility.

Framework-free: the routes in ``app.py`` call one method each and render what it returns; errors
are :mod:`headwater.registry.errors` classes. State lives in the SQL store; this process caches what
can never change -- a schema id's content and its parsed form, a fingerprint's id -- and reads
subject, version, config and mode state from the database every time, so several registry
processes sharing one PostgreSQL never serve each other stale subject state.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
import orjson
from sqlalchemy.engine import Connection

from headwater.registry.compatibility import Finding, Level, check
from headwater.registry.errors import (
    IdMismatchError,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    RegistryError,
    SchemaNotFoundError,
    StoreTimeoutError,
    SubjectConfigNotFoundError,
    SubjectModeNotFoundError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from headwater.registry.schema import AVRO, SCHEMA_TYPES, ParsedSchema, SchemaReference, parse
from headwater.types import SchemaId
from headwater_registry import metrics
from headwater_registry.cache import BoundedCache
from headwater_registry.store import GLOBAL, RETRYABLE, SQLStore, StoredSchema, VersionRow

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
CACHE_ENTRIES = 100_000
# Labelled children looked up once: ``labels()`` validates and locks on every call, a noticeable
# share of a cached read.
_BODY_HITS = metrics.CACHE_HITS.labels("schema_by_id")
_TEXT_HITS = metrics.CACHE_HITS.labels("schema_text")
MAX_REFERENCE_DEPTH = 32
_RETRIES = 30
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
T = TypeVar("T")


@dataclass(frozen=True)
class SchemaInput:
    """A schema as a request submits it: text, type and references to other subjects' types."""

    text: str
    schema_type: str | None = None
    references: tuple[SchemaReference, ...] = ()


class Registry:
    """Everything the REST API does, over one :class:`SQLStore`."""

    def __init__(self, store: SQLStore, default_compatibility: str = "BACKWARD") -> None:
        self.store = store
        self.default_compatibility = parse_level(default_compatibility)
        # Bounded so a registry with very many schemas keeps a steady footprint; parsed trees
        # are the heaviest entries, so fewer of them are kept.
        self._stored: BoundedCache[int, StoredSchema] = BoundedCache(CACHE_ENTRIES)
        self._parsed: BoundedCache[int, ParsedSchema] = BoundedCache(CACHE_ENTRIES // 10)
        self._bodies: BoundedCache[int, bytes] = BoundedCache(CACHE_ENTRIES)
        self._texts: BoundedCache[int, bytes] = BoundedCache(CACHE_ENTRIES)
        self._ids: BoundedCache[str, SchemaId] = BoundedCache(CACHE_ENTRIES)

    # --- schemas by id (immutable, cached) ------------------------------------------------------

    def cached_schema_body(self, schema_id: int, text_only: bool = False) -> bytes | None:
        """``GET /schemas/ids/{id}`` (``.../schema`` with ``text_only``) from the cache alone.

        None on a miss. The bodies are rendered once per id: ids never change, and rendering
        (a dict, orjson, a response model) cost more than the rest of a cached read.
        """
        body = (self._texts if text_only else self._bodies).get(schema_id)
        if body is not None:
            (_TEXT_HITS if text_only else _BODY_HITS).inc()
        return body

    async def schema_body(self, schema_id: int, text_only: bool = False) -> bytes:
        """``GET /schemas/ids/{id}`` (or ``.../schema``) pre-rendered; a hit stays on the loop."""
        body = self.cached_schema_body(schema_id, text_only)
        if body is not None:
            return body
        metrics.CACHE_MISSES.labels("schema_text" if text_only else "schema_by_id").inc()
        return await anyio.to_thread.run_sync(self._render_schema_body, schema_id, text_only)

    def _render_schema_body(self, schema_id: int, text_only: bool) -> bytes:
        stored = self._schema(schema_id)
        if text_only:
            # The schema itself as compact JSON, as Confluent returns it (not the stored text).
            body = orjson.dumps(orjson.loads(stored.text))
            self._texts.put(schema_id, body)
        else:
            body = orjson.dumps(schema_document(stored))
            self._bodies.put(schema_id, body)
        return body

    def schema_subjects(self, schema_id: int, deleted: bool) -> list[str]:
        return sorted({v.subject for v in self._schema_versions(schema_id, deleted)})

    def schema_versions(self, schema_id: int, deleted: bool) -> list[dict[str, Any]]:
        return [
            {"subject": v.subject, "version": v.version}
            for v in self._schema_versions(schema_id, deleted)
        ]

    def _schema_versions(self, schema_id: int, deleted: bool) -> list[VersionRow]:
        self._schema(schema_id)
        with self.store.read() as conn:
            rows = self.store.versions_of_schema(conn, schema_id)
        return [v for v in rows if deleted or not v.deleted]

    def _schema(self, schema_id: int, conn: Connection | None = None) -> StoredSchema:
        stored = self._stored.get(schema_id)
        if stored is not None:
            return stored
        if conn is None:
            with self.store.read() as own:
                stored = self.store.get_schema(own, schema_id)
        else:
            stored = self.store.get_schema(conn, schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        self._stored.put(schema_id, stored)
        return stored

    def _parsed_schema(self, conn: Connection, schema_id: int) -> ParsedSchema:
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            metrics.CACHE_HITS.labels("parsed_schema").inc()
            return parsed
        metrics.CACHE_MISSES.labels("parsed_schema").inc()
        stored = self._schema(schema_id, conn)
        refs = self._resolve_references(conn, stored.references, 0)
        parsed = parse(stored.text, refs, stored.schema_type)
        self._parsed.put(schema_id, parsed)
        return parsed

    def list_schemas(
        self, prefix: str, deleted: bool, latest_only: bool, offset: int, limit: int
    ) -> list[dict[str, Any]]:
        with self.store.read() as conn:
            rows = [v for v in self.store.all_versions(conn, prefix) if deleted or not v.deleted]
            if latest_only:
                latest: dict[str, VersionRow] = {}
                for v in rows:
                    latest[v.subject] = v
                rows = list(latest.values())
            rows = _page(rows, offset, limit)
            return [self._version_document(conn, v) for v in rows]

    @staticmethod
    def schema_types() -> list[str]:
        return list(SCHEMA_TYPES)

    # --- subjects and versions ------------------------------------------------------------------

    def list_subjects(
        self, prefix: str, deleted: bool, deleted_only: bool, offset: int, limit: int
    ) -> list[str]:
        with self.store.read() as conn:
            rows = self.store.subjects(conn, prefix)
        if deleted_only:
            names = [s for s, live, _total in rows if live == 0]
        else:
            names = [s for s, live, _total in rows if live > 0 or deleted]
        return _page(names, offset, limit)

    def list_versions(
        self, subject: str, deleted: bool, deleted_only: bool, offset: int, limit: int
    ) -> list[int]:
        with self.store.read() as conn:
            rows = self.store.versions(conn, subject)
        if not rows or (not deleted and not deleted_only and all(v.deleted for v in rows)):
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        if deleted_only:
            picked = [v.version for v in rows if v.deleted]
        else:
            picked = [v.version for v in rows if deleted or not v.deleted]
        return _page(picked, offset, limit)

    def get_version(self, subject: str, version: str, deleted: bool) -> dict[str, Any]:
        with self.store.read() as conn:
            row = self._find_version(conn, subject, version, deleted)
            return self._version_document(conn, row)

    def get_version_schema(self, subject: str, version: str, deleted: bool) -> Any:
        with self.store.read() as conn:
            row = self._find_version(conn, subject, version, deleted)
            return orjson.loads(self._schema(row.schema_id, conn).text)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        with self.store.read() as conn:
            row = self._find_version(conn, subject, version, deleted=True)
            return self.store.referencing_schema_ids(conn, subject, row.version)

    def _find_version(
        self, conn: Connection, subject: str, version: str, deleted: bool
    ) -> VersionRow:
        """The version a path names; soft-deleted ones only with ``deleted``.

        Reads one row, not the subject's whole history: ``latest`` is the newest live version
        (with ``deleted``, the newest soft-deleted one when none is live).
        """
        number = parse_version(version)
        if number == -1:
            row = self.store.latest_version(conn, subject)
            if row is None or (row.deleted and not deleted):
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            return row
        row = self.store.version(conn, subject, number)
        if row is not None and (deleted or not row.deleted):
            return row
        if not self.store.has_versions(conn, subject, deleted):
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        raise VersionNotFoundError(f"Version {number} not found.")

    def _version_document(self, conn: Connection, row: VersionRow) -> dict[str, Any]:
        stored = self._schema(row.schema_id, conn)
        return {
            "subject": row.subject,
            "version": row.version,
            "id": row.schema_id,
            **schema_document(stored),
        }

    def lookup(
        self, subject: str, schema: SchemaInput, normalize: bool, deleted: bool
    ) -> dict[str, Any]:
        """``POST /subjects/{s}``: the version of ``subject`` holding this schema.

        Matches the exact identity text first, then the normal form through its index, so a
        schema that differs only in whitespace, key order or namespace spelling is still found.
        """
        with self.store.read() as conn:
            if not self.store.has_versions(conn, subject, deleted):
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            parsed = self._parse(conn, schema)
            if normalize:
                parsed = parsed.normalized()
            schema_id = self._find_id(conn, parsed.fingerprint)
            matches = []
            if schema_id is not None:
                matches = self.store.subject_versions_of_schema(conn, subject, schema_id)
            matches = [v for v in matches if deleted or not v.deleted]
            if not matches:
                by_normal = self.store.find_normalized_versions(
                    conn, subject, parsed.normalized_fingerprint
                )
                matches = [v for v in by_normal if deleted or not v.deleted]
            if not matches:
                raise SchemaNotFoundError("Schema not found")
            return self._version_document(conn, matches[-1])

    def register(
        self,
        subject: str,
        schema: SchemaInput,
        normalize: bool,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> SchemaId:
        """``POST /subjects/{s}/versions``: the schema's global id, registering it if new here."""
        check_subject(subject)
        return self._retry(
            lambda: self._register_once(subject, schema, normalize, schema_id, version)
        )

    def _register_once(
        self,
        subject: str,
        schema: SchemaInput,
        normalize: bool,
        explicit_id: int | None,
        explicit_version: int | None,
    ) -> SchemaId:
        # Referenced subjects are locked too, so a concurrent delete of a referenced version
        # either sees this reference or happens before it is resolved.
        referenced = (r.subject for r in schema.references)
        with self.store.write(subject, *referenced) as conn:
            mode = self._effective_mode(conn, subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
            if (explicit_id is not None and explicit_id >= 0) and mode != "IMPORT":
                raise OperationNotPermittedError(
                    f"Subject {subject} is not in import mode: a schema id may not be given"
                )
            parsed = self._parse(conn, schema)
            level, config_normalize = self._effective_config(conn, subject)
            if normalize or config_normalize:
                parsed = parsed.normalized()
            rows = self.store.versions(conn, subject)
            existing = self._find_id(conn, parsed.fingerprint)
            if explicit_id is not None and explicit_id >= 0 and existing not in (None, explicit_id):
                raise IdMismatchError(
                    f"Schema already registered with id {existing} instead of input id "
                    f"{explicit_id}"
                )
            live = [v for v in rows if not v.deleted]
            if existing is not None:
                for v in live:
                    if v.schema_id == existing:
                        return existing
            if mode != "IMPORT":
                olds = [(v.version, self._parsed_schema(conn, v.schema_id)) for v in live]
                findings = check(parsed, olds, level)
                if findings:
                    raise IncompatibleSchemaError(incompatible_message(subject, findings, level))
            schema_id = existing
            if schema_id is None:
                schema_id = self._insert_schema(conn, parsed, explicit_id)
            next_version = max((v.version for v in rows), default=0) + 1
            if explicit_version is not None and explicit_version >= 0:
                if any(v.version == explicit_version for v in rows) or (
                    mode != "IMPORT" and explicit_version != next_version
                ):
                    raise InvalidVersionError(
                        f"Version {explicit_version} is not valid for subject {subject}: "
                        f"the next version is {next_version}"
                    )
                next_version = explicit_version
            self.store.insert_version(conn, subject, next_version, schema_id)
            return schema_id

    def _insert_schema(
        self, conn: Connection, parsed: ParsedSchema, explicit_id: int | None
    ) -> SchemaId:
        if explicit_id is not None and explicit_id >= 0:
            taken = self.store.get_schema(conn, explicit_id)
            if taken is not None:
                raise IdMismatchError(
                    f"Schema id {explicit_id} is already used by a different schema"
                )
            schema_id = SchemaId(explicit_id)
            self.store.raise_counter(conn, schema_id)
        else:
            schema_id = self.store.allocate_id(conn)
            if self.store.is_postgres:
                # The counter's row lock may have waited for another writer that just stored
                # this very schema: look again so the same content keeps one id. (SQLite
                # writers are serialized from BEGIN, so they already saw it.)
                found = self.store.find_schema_id(conn, parsed.fingerprint)
                if found is not None:
                    return found
        self.store.insert_schema(
            conn,
            schema_id,
            parsed.schema_type,
            parsed.text,
            parsed.references,
            parsed.fingerprint,
            parsed.normalized_fingerprint,
        )
        return schema_id

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """``DELETE /subjects/{s}``: soft delete every live version, or purge a soft-deleted one."""
        return self._retry(lambda: self._delete_subject_once(subject, permanent))

    def _delete_subject_once(self, subject: str, permanent: bool) -> list[int]:
        with self.store.write(subject) as conn:
            self._require_writable(conn, subject)
            rows = self.store.versions(conn, subject)
            if not rows:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            live = [v.version for v in rows if not v.deleted]
            if permanent:
                if live:
                    raise SubjectNotSoftDeletedError(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted"
                    )
                versions = [v.version for v in rows]
                self.store.hard_delete(conn, subject, versions)
                self.store.delete_config(conn, subject)
                self.store.delete_mode(conn, subject)
                return versions
            if not live:
                raise SubjectSoftDeletedError(
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                    "permanently"
                )
            for version in live:
                self._require_unreferenced(conn, subject, version)
            self.store.soft_delete(conn, subject, live)
            return live

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        """``DELETE /subjects/{s}/versions/{v}``: soft delete, or purge a soft-deleted version."""
        return self._retry(lambda: self._delete_version_once(subject, version, permanent))

    def _delete_version_once(self, subject: str, version: str, permanent: bool) -> int:
        number = parse_version(version)
        with self.store.write(subject) as conn:
            self._require_writable(conn, subject)
            rows = self.store.versions(conn, subject)
            if not rows:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            live = [v for v in rows if not v.deleted]
            if number == -1:
                candidates = rows if permanent else live
                if not candidates:
                    raise VersionNotFoundError(f"Subject '{subject}' has no live versions")
                row = candidates[-1]
            else:
                found = [v for v in rows if v.version == number]
                if not found:
                    raise VersionNotFoundError(f"Version {number} not found.")
                row = found[0]
            if permanent:
                if not row.deleted:
                    raise VersionNotSoftDeletedError(
                        f"Subject '{subject}' Version {row.version} was not deleted first "
                        "before being permanently deleted"
                    )
                self._require_unreferenced(conn, subject, row.version)
                self.store.hard_delete(conn, subject, [row.version])
                return row.version
            if row.deleted:
                raise VersionSoftDeletedError(
                    f"Subject '{subject}' Version {row.version} was soft deleted. Set "
                    "permanent=true to delete permanently"
                )
            self._require_unreferenced(conn, subject, row.version)
            self.store.soft_delete(conn, subject, [row.version])
            return row.version

    def _require_unreferenced(self, conn: Connection, subject: str, version: int) -> None:
        users = self.store.referencing_schema_ids(conn, subject, version)
        if users:
            raise ReferenceExistsError(
                f"One or more references exist to the schema {{subject={subject}, "
                f"version={version}}}: schema ids {users}"
            )

    # --- compatibility --------------------------------------------------------------------------

    def test_compatibility(
        self, subject: str, version: str | None, schema: SchemaInput, normalize: bool, verbose: bool
    ) -> dict[str, Any]:
        """``POST /compatibility/subjects/{s}/versions[/{v}]``: would ``schema`` be accepted?

        With a version, only that version is checked (in the direction(s) of the subject's
        level); without, the versions the level names -- the latest, or every live one for
        transitive levels -- exactly as registration would.
        """
        number = None if version is None else parse_version(version)
        with self.store.read() as conn:
            parsed = self._parse(conn, schema)
            if normalize:
                parsed = parsed.normalized()
            level = self._effective_level(conn, subject)
            live = [v for v in self.store.versions(conn, subject) if not v.deleted]
            if number is None:
                targets = live
            elif number == -1:
                targets = live[-1:]
            else:
                if not live:
                    raise SubjectNotFoundError(f"Subject '{subject}' not found.")
                targets = [v for v in live if v.version == number]
                if not targets:
                    raise VersionNotFoundError(f"Version {number} not found.")
            if number is not None and level.transitive:
                level = Level(level.value.removesuffix("_TRANSITIVE"))
            olds = [(v.version, self._parsed_schema(conn, v.schema_id)) for v in targets]
        findings = check(parsed, olds, level)
        result: dict[str, Any] = {"is_compatible": not findings}
        if verbose:
            result["messages"] = [f.message() for f in findings]
            if findings:
                result["messages"].append(f"{{compatibility: '{level.value}'}}")
        return result

    # --- config and mode ------------------------------------------------------------------------

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        with self.store.read() as conn:
            if subject is not None:
                found = self.store.get_config(conn, subject)
                if found is not None and found[0] is not None:
                    return _config_document(found, "compatibilityLevel")
                if not default_to_global:
                    raise SubjectConfigNotFoundError(
                        f"Subject '{subject}' does not have subject-level compatibility configured"
                    )
            found = self.store.get_config(conn, GLOBAL)
            if found is None or found[0] is None:
                return {"compatibilityLevel": self.default_compatibility.value}
            return _config_document(found, "compatibilityLevel")

    def put_config(
        self, subject: str | None, compatibility: str | None, normalize: bool | None
    ) -> dict[str, Any]:
        level = parse_level(compatibility) if compatibility is not None else None
        if subject is not None:
            check_subject(subject)
        key = GLOBAL if subject is None else subject

        def put() -> dict[str, Any]:
            with self.store.write(key) as conn:
                old = self.store.get_config(conn, key)
                new_level = level.value if level else (old[0] if old else None)
                new_normalize = normalize if normalize is not None else (old[1] if old else None)
                if new_level is None:
                    new_level = self.default_compatibility.value
                self.store.put_config(conn, key, new_level, new_normalize)
                return _config_document((new_level, new_normalize), "compatibility")

        return self._retry(put)

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        key = GLOBAL if subject is None else subject

        def delete() -> dict[str, Any]:
            with self.store.write(key) as conn:
                old = self.store.get_config(conn, key)
                if old is None or old[0] is None:
                    if subject is not None:
                        raise SubjectConfigNotFoundError(
                            f"Subject '{subject}' does not have subject-level compatibility "
                            "configured"
                        )
                    old = (self.default_compatibility.value, None)
                self.store.delete_config(conn, key)
                return _config_document(old, "compatibilityLevel")

        return self._retry(delete)

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict[str, str]:
        with self.store.read() as conn:
            if subject is not None:
                found = self.store.get_mode(conn, subject)
                if found is not None:
                    return {"mode": found}
                if not default_to_global:
                    raise SubjectModeNotFoundError(
                        f"Subject '{subject}' does not have subject-level mode configured"
                    )
            return {"mode": self.store.get_mode(conn, GLOBAL) or "READWRITE"}

    def put_mode(self, subject: str | None, mode: str, force: bool) -> dict[str, str]:
        value = mode.upper() if isinstance(mode, str) else mode
        if value not in MODES:
            raise InvalidModeError(f"Invalid mode {mode!r}: expected one of {', '.join(MODES)}")
        if subject is not None:
            check_subject(subject)
        key = GLOBAL if subject is None else subject

        def put() -> dict[str, str]:
            with self.store.write(key) as conn:
                if value == "IMPORT" and not force:
                    prefix = "" if subject is None else subject
                    has = [
                        s
                        for s, live, _total in self.store.subjects(conn, prefix)
                        if live and (subject is None or s == subject)
                    ]
                    if has:
                        raise OperationNotPermittedError(
                            "Cannot import since found existing subjects; use force=true"
                        )
                self.store.put_mode(conn, key, value)
                return {"mode": value}

        return self._retry(put)

    def delete_mode(self, subject: str | None) -> dict[str, str]:
        key = GLOBAL if subject is None else subject

        def delete() -> dict[str, str]:
            with self.store.write(key) as conn:
                old = self.store.get_mode(conn, key)
                if old is None:
                    if subject is not None:
                        raise SubjectModeNotFoundError(
                            f"Subject '{subject}' does not have subject-level mode configured"
                        )
                    old = "READWRITE"
                self.store.delete_mode(conn, key)
                return {"mode": old}

        return self._retry(delete)

    def contexts(self) -> list[str]:
        with self.store.read() as conn:
            names = {s for s, _live, _total in self.store.subjects(conn, ":.")}
        found = {n[1:].split(":", 1)[0] for n in names if n.count(":") >= 2}
        return [".", *sorted(found - {"."})]

    def ready(self) -> bool:
        self.store.ping()
        return True

    # --- internals ------------------------------------------------------------------------------

    def _effective_config(self, conn: Connection, subject: str) -> tuple[Level, bool]:
        """(compatibility level, normalize flag): the subject's own, else global, else default."""
        rows = self.store.configs_for(conn, subject)
        level, normalize = None, None
        for key in (subject, GLOBAL):
            found = rows.get(key)
            if found is not None:
                level = level or found[0]
                normalize = found[1] if normalize is None else normalize
        return (Level(level) if level else self.default_compatibility), bool(normalize)

    def _effective_level(self, conn: Connection, subject: str) -> Level:
        return self._effective_config(conn, subject)[0]

    def _effective_mode(self, conn: Connection, subject: str) -> str:
        rows = self.store.modes_for(conn, subject)
        global_mode = rows.get(GLOBAL, "READWRITE")
        if global_mode == "READONLY_OVERRIDE":
            return global_mode
        return rows.get(subject, global_mode)

    def _require_writable(self, conn: Connection, subject: str) -> None:
        if self._effective_mode(conn, subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")

    def _find_id(self, conn: Connection, fingerprint: str) -> SchemaId | None:
        found = self._ids.get(fingerprint)
        if found is not None:
            metrics.CACHE_HITS.labels("id_by_fingerprint").inc()
            return found
        found = self.store.find_schema_id(conn, fingerprint)
        if found is not None:
            # A fingerprint's id never changes once committed; a miss is not cached, because
            # another process may register the schema at any moment.
            self._ids.put(fingerprint, found)
        return found

    def _parse(self, conn: Connection, schema: SchemaInput) -> ParsedSchema:
        refs = self._resolve_references(conn, schema.references, 0)
        return parse(schema.text, refs, schema.schema_type)

    def _resolve_references(
        self, conn: Connection, references: Sequence[SchemaReference], depth: int
    ) -> list[tuple[SchemaReference, ParsedSchema]]:
        if depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchemaError("Invalid schema: references nest too deep (a cycle?)")
        resolved = []
        for ref in references:
            rows = [v for v in self.store.versions(conn, ref.subject) if not v.deleted]
            match = [v for v in rows if ref.version in (-1, v.version)]
            if not match:
                raise InvalidSchemaError(
                    f"Invalid schema: reference {ref.name!r} to subject {ref.subject!r} "
                    f"version {ref.version} does not exist"
                )
            stored = self._schema(match[-1].schema_id, conn)
            inner = self._resolve_references(conn, stored.references, depth + 1)
            resolved.append((ref, parse(stored.text, inner, stored.schema_type)))
        return resolved

    def _retry(self, attempt: Callable[[], T]) -> T:
        """Run a write transaction again when a concurrent writer made it conflict."""
        for n in range(_RETRIES):
            try:
                return attempt()
            except RegistryError:
                raise
            except RETRYABLE as e:
                if n == _RETRIES - 1:
                    raise StoreTimeoutError(
                        f"Gave up after {_RETRIES} conflicting attempts: {e}"
                    ) from e
                time.sleep(min(0.002 * (2**n), 0.1))
        raise AssertionError("unreachable")


def schema_document(stored: StoredSchema) -> dict[str, Any]:
    """The fields every schema answer carries: schema text, type (unless Avro), references."""
    doc: dict[str, Any] = {"schema": stored.text}
    if stored.schema_type != AVRO:
        doc["schemaType"] = stored.schema_type
    if stored.references:
        doc["references"] = [r.to_dict() for r in stored.references]
    return doc


def incompatible_message(subject: str, findings: Sequence[Finding], level: Level) -> str:
    details = ", ".join([*(f.message() for f in findings), f"{{compatibility: '{level.value}'}}"])
    return (
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{details}]"
    )


def parse_version(version: str) -> int:
    """A version path segment as a number: ``latest`` and ``-1`` mean -1; others must be >= 1."""
    if version == "latest":
        return -1
    try:
        number = int(version)
    except ValueError:
        number = 0
    if number == -1 or number >= 1:
        return number
    raise InvalidVersionError(
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"'
    )


def parse_level(level: str | None) -> Level:
    try:
        return Level(str(level).upper())
    except ValueError:
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level {level!r}: expected one of "
            f"{', '.join(lv.value for lv in Level)}"
        ) from None


def check_subject(subject: str) -> None:
    if not subject or _CONTROL.search(subject) or len(subject) > 512:
        raise InvalidSubjectError(f"The subject name {subject!r} is not valid")


def _config_document(found: tuple[str | None, bool | None], key: str) -> dict[str, Any]:
    doc: dict[str, Any] = {key: found[0]}
    if found[1] is not None:
        doc["normalize"] = found[1]
    return doc


def _page(items: list[T], offset: int, limit: int) -> list[T]:
    start = max(offset, 0)
    return items[start:] if limit <= 0 else items[start : start + limit]
