"""Subjects and their versions: listing, reading, soft and permanent deletes, contexts.

Versions are numbered per subject from the highest ever used (soft-deleted ones included), so a
number never names two schemas; a soft delete hides a version, a permanent one (only after a soft
delete) removes it. A version other schemas reference cannot be deleted (42206).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from headwater.registry.errors import (
    ReferenceExistsError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from headwater_registry.documents import VersionDocument
from headwater_registry.mode import Modes
from headwater_registry.names import LATEST, parse_version
from headwater_registry.schemas import Schemas
from headwater_registry.store.database import SQLStore
from headwater_registry.store.queries import Transaction, VersionRow

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """Which slice of a listing to answer: skip ``offset`` items, then at most ``limit``."""

    offset: int = 0
    limit: int = -1
    """0 or less: no limit."""

    def of(self, items: list[T]) -> list[T]:
        start = max(self.offset, 0)
        return items[start:] if self.limit <= 0 else items[start : start + self.limit]


class Subjects:
    """The subject and version routes, over the ``subject_versions`` rows."""

    def __init__(self, store: SQLStore, schemas: Schemas, modes: Modes) -> None:
        self.store = store
        self.schemas = schemas
        self.modes = modes

    # --- reads ----------------------------------------------------------------------------------

    def list_subjects(
        self, prefix: str, page: Page, *, deleted: bool, deleted_only: bool
    ) -> list[str]:
        """``GET /subjects``: live subjects; with ``deleted`` also soft-deleted ones."""
        with self.store.read() as tx:
            rows = tx.subjects(prefix)
        if deleted_only:
            names = [s.subject for s in rows if s.live_versions == 0]
        else:
            names = [s.subject for s in rows if s.live_versions > 0 or deleted]
        return page.of(names)

    def list_versions(
        self, subject: str, page: Page, *, deleted: bool, deleted_only: bool
    ) -> list[int]:
        """``GET /subjects/{s}/versions`` (40401 if the subject has nothing to show)."""
        with self.store.read() as tx:
            rows = tx.versions(subject)
        if not rows or (not deleted and not deleted_only and all(v.deleted for v in rows)):
            raise _subject_not_found(subject)
        if deleted_only:
            picked = [v.version for v in rows if v.deleted]
        else:
            picked = [v.version for v in rows if deleted or not v.deleted]
        return page.of(picked)

    def list_schemas(
        self, prefix: str, page: Page, *, deleted: bool, latest_only: bool
    ) -> list[VersionDocument]:
        """``GET /schemas``: every subject version (or each subject's newest) as a document."""
        with self.store.read() as tx:
            rows = [v for v in tx.all_versions(prefix) if deleted or not v.deleted]
            if latest_only:
                latest: dict[str, VersionRow] = {}
                for v in rows:
                    latest[v.subject] = v
                rows = list(latest.values())
            return [self.schemas.version_document(tx, v) for v in page.of(rows)]

    def get_version(self, subject: str, version: str, *, deleted: bool) -> VersionDocument:
        """``GET /subjects/{s}/versions/{v}``."""
        with self.store.read() as tx:
            return self.schemas.version_document(
                tx, self._find_version(tx, subject, version, deleted)
            )

    def get_version_schema(self, subject: str, version: str, *, deleted: bool) -> Any:
        """``GET /subjects/{s}/versions/{v}/schema``: the schema itself, parsed JSON."""
        with self.store.read() as tx:
            row = self._find_version(tx, subject, version, deleted)
            return orjson.loads(self.schemas.stored(tx, row.schema_id).text)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        """``GET /subjects/{s}/versions/{v}/referencedby``: ids of live schemas using it."""
        with self.store.read() as tx:
            row = self._find_version(tx, subject, version, deleted=True)
            return tx.referencing_schema_ids(subject, row.version)

    def contexts(self) -> list[str]:
        """``GET /contexts``: the default context ``.`` and those qualified subjects name."""
        with self.store.read() as tx:
            names = {s.subject for s in tx.subjects(":.")}
        found = {n[1:].split(":", 1)[0] for n in names if n.count(":") >= 2}
        return [".", *sorted(found - {"."})]

    def _find_version(
        self, tx: Transaction, subject: str, version: str, deleted: bool
    ) -> VersionRow:
        """The version a path names; soft-deleted ones only with ``deleted``.

        Reads one row, not the subject's whole history: ``latest`` is the newest live version
        (with ``deleted``, the newest soft-deleted one when none is live).
        """
        number = parse_version(version)
        if number == LATEST:
            row = tx.latest_version(subject)
            if row is None or (row.deleted and not deleted):
                raise _subject_not_found(subject)
            return row
        row = tx.version(subject, number)
        if row is not None and (deleted or not row.deleted):
            return row
        if not tx.has_versions(subject, include_deleted=deleted):
            raise _subject_not_found(subject)
        raise VersionNotFoundError(f"Version {number} not found.")

    # --- deletes --------------------------------------------------------------------------------

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        """``DELETE /subjects/{s}``: soft delete every live version, or purge a soft-deleted one."""

        def delete(tx: Transaction) -> list[int]:
            self.modes.require_writable(tx, subject)
            rows = tx.versions(subject)
            if not rows:
                raise _subject_not_found(subject)
            live = [v.version for v in rows if not v.deleted]
            if permanent:
                if live:
                    raise SubjectNotSoftDeletedError(
                        f"Subject '{subject}' was not deleted first before being permanently "
                        "deleted"
                    )
                versions = [v.version for v in rows]
                tx.hard_delete(subject, versions)
                tx.delete_config(subject)
                tx.delete_mode(subject)
                return versions
            if not live:
                raise SubjectSoftDeletedError(
                    f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                    "permanently"
                )
            for version in live:
                _require_unreferenced(tx, subject, version)
            tx.soft_delete(subject, live)
            return live

        return self.store.write(delete, subject)

    def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        """``DELETE /subjects/{s}/versions/{v}``: soft delete, or purge a soft-deleted version."""
        number = parse_version(version)

        def delete(tx: Transaction) -> int:
            self.modes.require_writable(tx, subject)
            rows = tx.versions(subject)
            if not rows:
                raise _subject_not_found(subject)
            if number == LATEST:
                candidates = rows if permanent else [v for v in rows if not v.deleted]
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
                _require_unreferenced(tx, subject, row.version)
                tx.hard_delete(subject, [row.version])
                return row.version
            if row.deleted:
                raise VersionSoftDeletedError(
                    f"Subject '{subject}' Version {row.version} was soft deleted. Set "
                    "permanent=true to delete permanently"
                )
            _require_unreferenced(tx, subject, row.version)
            tx.soft_delete(subject, [row.version])
            return row.version

        return self.store.write(delete, subject)


def _require_unreferenced(tx: Transaction, subject: str, version: int) -> None:
    users = tx.referencing_schema_ids(subject, version)
    if users:
        raise ReferenceExistsError(
            f"One or more references exist to the schema {{subject={subject}, "
            f"version={version}}}: schema ids {users}"
        )


def _subject_not_found(subject: str) -> SubjectNotFoundError:
    return SubjectNotFoundError(f"Subject '{subject}' not found.")
