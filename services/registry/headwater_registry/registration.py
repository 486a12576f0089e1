"""Registration and lookup: a schema's global id under a subject, allocating one if it is new.

The same content (text, type and references, compared by fingerprint) keeps one global id across
subjects and past hard deletes; a subject gets a new version only for a schema it does not
already hold live. In IMPORT mode a request may carry its own id and version and skips the
compatibility check.
"""

from __future__ import annotations

from headwater.registry.errors import (
    IdMismatchError,
    IncompatibleSchemaError,
    InvalidVersionError,
    OperationNotPermittedError,
    SchemaNotFoundError,
    SubjectNotFoundError,
)
from headwater.registry.schema import ParsedSchema
from headwater.types import SchemaId
from headwater_registry.compatibility import Compatibility, incompatible_message
from headwater_registry.config import Configs
from headwater_registry.documents import VersionDocument
from headwater_registry.mode import IMPORT, Modes
from headwater_registry.names import check_subject
from headwater_registry.schemas import SchemaInput, Schemas
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import StoredSchema, Transaction, VersionRow


class Registration:
    """``POST /subjects/{s}/versions`` and ``POST /subjects/{s}``."""

    def __init__(
        self,
        store: SQLStore,
        schemas: Schemas,
        *,
        configs: Configs,
        modes: Modes,
        compatibility: Compatibility,
    ) -> None:
        self.store = store
        self.schemas = schemas
        self.configs = configs
        self.modes = modes
        self.compatibility = compatibility

    def register(
        self,
        subject: str,
        schema: SchemaInput,
        *,
        normalize: bool,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> SchemaId:
        """The schema's global id under ``subject``, registering it as a new version if needed.

        ``schema_id`` and ``version`` (IMPORT mode only; negative means not given) ask for that
        id and version number instead of the next ones.
        """
        check_subject(subject)
        explicit_id = schema_id if schema_id is not None and schema_id >= 0 else None
        explicit_version = version if version is not None and version >= 0 else None

        def register(tx: Transaction) -> SchemaId:
            mode = self.modes.require_writable(tx, subject)
            if explicit_id is not None and mode != IMPORT:
                raise OperationNotPermittedError(
                    f"Subject {subject} is not in import mode: a schema id may not be given"
                )
            parsed = self.schemas.parse(tx, schema)
            config = self.configs.effective(tx, subject)
            if normalize or config.normalize:
                parsed = parsed.normalized()
            rows = tx.versions(subject)
            existing = self.schemas.find_id(tx, parsed.fingerprint)
            if explicit_id is not None and existing not in (None, explicit_id):
                raise IdMismatchError(
                    f"Schema already registered with id {existing} instead of input id "
                    f"{explicit_id}"
                )
            live = [v for v in rows if not v.deleted]
            if existing is not None and any(v.schema_id == existing for v in live):
                return existing
            if mode != IMPORT:
                findings = self.compatibility.findings(tx, parsed, live, config.level)
                if findings:
                    message = incompatible_message(subject, findings, config.level)
                    raise IncompatibleSchemaError(message)
            new_id = existing
            if new_id is None:
                new_id = self._store_schema(tx, parsed, explicit_id)
            number = _next_version(subject, rows, explicit_version, imported=mode == IMPORT)
            tx.insert_version(subject, number, new_id)
            return new_id

        # Referenced subjects are locked too, so a concurrent delete of a referenced version
        # either sees this reference or happens before it is resolved.
        return self.store.write(register, subject, *(r.subject for r in schema.references))

    def _store_schema(
        self, tx: Transaction, parsed: ParsedSchema, explicit_id: int | None
    ) -> SchemaId:
        """Store a schema no id holds yet, under ``explicit_id`` or the next id."""
        if explicit_id is not None:
            if tx.get_schema(explicit_id) is not None:
                raise IdMismatchError(
                    f"Schema id {explicit_id} is already used by a different schema"
                )
            schema_id = SchemaId(explicit_id)
            tx.raise_counter(schema_id)
        else:
            schema_id = tx.allocate_id()
            if self.store.is_postgres:
                # The counter's row lock may have waited for another writer that just stored
                # this very schema: look again so the same content keeps one id. (SQLite
                # writers are serialized from BEGIN, so they already saw it.)
                found = tx.find_schema_id(parsed.fingerprint)
                if found is not None:
                    return found
        stored = StoredSchema(schema_id, parsed.schema_type, parsed.text, parsed.references)
        tx.insert_schema(
            stored,
            fingerprint=parsed.fingerprint,
            normalized_fingerprint=parsed.normalized_fingerprint,
        )
        return schema_id

    def lookup(
        self, subject: str, schema: SchemaInput, *, normalize: bool, deleted: bool
    ) -> VersionDocument:
        """The version of ``subject`` holding this schema (40403 if none does).

        Matches the exact identity text first, then the normal form through its index, so a
        schema that differs only in whitespace, key order or namespace spelling is still found.
        """
        with self.store.read() as tx:
            if not tx.has_versions(subject, include_deleted=deleted):
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            parsed = self.schemas.parse(tx, schema)
            if normalize:
                parsed = parsed.normalized()
            schema_id = self.schemas.find_id(tx, parsed.fingerprint)
            matches: list[VersionRow] = []
            if schema_id is not None:
                matches = tx.subject_versions_of_schema(subject, schema_id)
            matches = [v for v in matches if deleted or not v.deleted]
            if not matches:
                by_normal = tx.find_normalized_versions(subject, parsed.normalized_fingerprint)
                matches = [v for v in by_normal if deleted or not v.deleted]
            if not matches:
                raise SchemaNotFoundError("Schema not found")
            return self.schemas.version_document(tx, matches[-1])


def _next_version(
    subject: str, rows: list[VersionRow], explicit: int | None, *, imported: bool
) -> int:
    """The number of the subject's new version: one above any ever used, or the explicit one
    (IMPORT mode may pick any unused number; otherwise it must be that next one)."""
    following = max((v.version for v in rows), default=0) + 1
    if explicit is None:
        return following
    if any(v.version == explicit for v in rows) or (not imported and explicit != following):
        raise InvalidVersionError(
            f"Version {explicit} is not valid for subject {subject}: "
            f"the next version is {following}"
        )
    return explicit
