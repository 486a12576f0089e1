"""The registry's queries: one :class:`Transaction` method per question the core asks the database.

The core holds a :class:`Transaction` (from ``SQLStore.read`` or ``SQLStore.write``) and never
sees SQL; every method runs inside that transaction and answers with the typed rows below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from headwater.registry.schema import SchemaReference
from headwater.types import SchemaId
from headwater_registry.store.tables import (
    GLOBAL,
    configs,
    counters,
    modes,
    schema_references,
    schemas,
    subject_versions,
)


@dataclass(frozen=True)
class StoredSchema:
    """A row of ``schemas``: immutable once written, so safe to cache in any process."""

    id: SchemaId
    schema_type: str
    text: str
    references: tuple[SchemaReference, ...]


@dataclass(frozen=True)
class VersionRow:
    """A row of ``subject_versions``: one version of a subject and the schema it names."""

    subject: str
    version: int
    schema_id: SchemaId
    deleted: bool


@dataclass(frozen=True)
class ConfigRow:
    """A row of ``configs``: a subject's (or the global) level and normalize flag, each optional."""

    compatibility: str | None
    normalize: bool | None


@dataclass(frozen=True)
class SubjectRow:
    """A subject that has versions, and how many of them are live (not soft-deleted)."""

    subject: str
    live_versions: int


# The hot statements, built once: SQLAlchemy then reuses their cache keys and compiled forms,
# which makes each execution about three times cheaper than building the statement per call.
_sv = subject_versions.c
_SCHEMA_BY_ID = sa.select(schemas).where(schemas.c.id == sa.bindparam("id"))
_ID_BY_FINGERPRINT = sa.select(schemas.c.id).where(schemas.c.fingerprint == sa.bindparam("fp"))
_VERSIONS = (
    sa.select(subject_versions).where(_sv.subject == sa.bindparam("s")).order_by(_sv.version)
)
_ONE_VERSION = sa.select(subject_versions).where(
    _sv.subject == sa.bindparam("s"), _sv.version == sa.bindparam("v")
)
# The newest live version, or the newest soft-deleted one when none is live: one primary-key
# range read however many versions the subject has.
_LATEST_VERSION = (
    sa.select(subject_versions)
    .where(_sv.subject == sa.bindparam("s"))
    .order_by(_sv.deleted, _sv.version.desc())
    .limit(1)
)
_ANY_VERSION = sa.select(_sv.version).where(_sv.subject == sa.bindparam("s")).limit(1)
_ANY_LIVE_VERSION = (
    sa.select(_sv.version).where(_sv.subject == sa.bindparam("s"), _sv.deleted.is_(False)).limit(1)
)
_SUBJECT_VERSIONS_OF_SCHEMA = (
    sa.select(subject_versions)
    .where(_sv.subject == sa.bindparam("s"), _sv.schema_id == sa.bindparam("id"))
    .order_by(_sv.version)
)
_NORMALIZED_VERSIONS = (
    sa.select(subject_versions)
    .join(schemas, schemas.c.id == _sv.schema_id)
    .where(_sv.subject == sa.bindparam("s"), schemas.c.normalized_fingerprint == sa.bindparam("fp"))
    .order_by(_sv.version)
)
_NEXT_ID = (
    sa.update(counters)
    .where(counters.c.name == "schema_id")
    .values(value=counters.c.value + 1)
    .returning(counters.c.value)
)
_INSERT_VERSION = sa.insert(subject_versions).values(deleted=False)
_INSERT_SCHEMA = sa.insert(schemas)
_CONFIGS_FOR = sa.select(configs).where(
    sa.or_(configs.c.subject == sa.bindparam("s"), configs.c.subject == GLOBAL)
)
_MODES_FOR = sa.select(modes).where(
    sa.or_(modes.c.subject == sa.bindparam("s"), modes.c.subject == GLOBAL)
)


class Transaction:
    """The queries of one open transaction (a read, or a serialised write)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # --- schemas --------------------------------------------------------------------------------

    def get_schema(self, schema_id: int) -> StoredSchema | None:
        row = self.connection.execute(_SCHEMA_BY_ID, {"id": schema_id}).first()
        if row is None:
            return None
        refs = tuple(SchemaReference(**r) for r in orjson.loads(row.refs))
        return StoredSchema(SchemaId(row.id), row.schema_type, row.schema_text, refs)

    def find_schema_id(self, fingerprint: str) -> SchemaId | None:
        found = self.connection.execute(_ID_BY_FINGERPRINT, {"fp": fingerprint}).scalar()
        return None if found is None else SchemaId(found)

    def find_normalized_versions(
        self, subject: str, normalized_fingerprint: str
    ) -> list[VersionRow]:
        params = {"s": subject, "fp": normalized_fingerprint}
        return [_version(r) for r in self.connection.execute(_NORMALIZED_VERSIONS, params)]

    def allocate_id(self) -> SchemaId:
        return SchemaId(self.connection.execute(_NEXT_ID).scalar_one())

    def raise_counter(self, at_least: int) -> None:
        self.connection.execute(
            sa.update(counters)
            .where(counters.c.name == "schema_id", counters.c.value < at_least)
            .values(value=at_least)
        )

    def insert_schema(
        self, schema: StoredSchema, *, fingerprint: str, normalized_fingerprint: str
    ) -> None:
        row = {
            "id": schema.id,
            "schema_type": schema.schema_type,
            "schema_text": schema.text,
            "refs": orjson.dumps([r.to_dict() for r in schema.references]).decode(),
            "fingerprint": fingerprint,
            "normalized_fingerprint": normalized_fingerprint,
        }
        self.connection.execute(_INSERT_SCHEMA, row)
        if schema.references:
            self.connection.execute(
                sa.insert(schema_references),
                [
                    {"schema_id": schema.id, "position": i, **r.to_dict()}
                    for i, r in enumerate(schema.references)
                ],
            )

    # --- subject versions -----------------------------------------------------------------------

    def versions(self, subject: str) -> list[VersionRow]:
        """All versions of a subject, soft-deleted ones included, oldest first."""
        return [_version(r) for r in self.connection.execute(_VERSIONS, {"s": subject})]

    def version(self, subject: str, version: int) -> VersionRow | None:
        """One version of a subject (soft-deleted or not), None if it does not exist."""
        row = self.connection.execute(_ONE_VERSION, {"s": subject, "v": version}).first()
        return None if row is None else _version(row)

    def latest_version(self, subject: str) -> VersionRow | None:
        """The newest live version; the newest soft-deleted one if none is live; None if none."""
        row = self.connection.execute(_LATEST_VERSION, {"s": subject}).first()
        return None if row is None else _version(row)

    def has_versions(self, subject: str, *, include_deleted: bool) -> bool:
        query = _ANY_VERSION if include_deleted else _ANY_LIVE_VERSION
        return self.connection.execute(query, {"s": subject}).first() is not None

    def subject_versions_of_schema(self, subject: str, schema_id: int) -> list[VersionRow]:
        params = {"s": subject, "id": schema_id}
        return [_version(r) for r in self.connection.execute(_SUBJECT_VERSIONS_OF_SCHEMA, params)]

    def versions_of_schema(self, schema_id: int) -> list[VersionRow]:
        query = (
            sa.select(subject_versions)
            .where(_sv.schema_id == schema_id)
            .order_by(_sv.subject, _sv.version)
        )
        return [_version(r) for r in self.connection.execute(query)]

    def all_versions(self, prefix: str) -> list[VersionRow]:
        query = sa.select(subject_versions).order_by(_sv.subject, _sv.version)
        if prefix:
            query = query.where(_sv.subject.startswith(prefix, autoescape=True))
        return [_version(r) for r in self.connection.execute(query)]

    def subjects(self, prefix: str) -> list[SubjectRow]:
        """Every subject with any version (live or soft-deleted), by name."""
        live = sa.func.sum(sa.case((_sv.deleted, 0), else_=1))
        query = sa.select(_sv.subject, live).group_by(_sv.subject).order_by(_sv.subject)
        if prefix:
            query = query.where(_sv.subject.startswith(prefix, autoescape=True))
        return [SubjectRow(r[0], int(r[1])) for r in self.connection.execute(query)]

    def insert_version(self, subject: str, version: int, schema_id: int) -> None:
        params = {"subject": subject, "version": version, "schema_id": schema_id}
        self.connection.execute(_INSERT_VERSION, params)

    def soft_delete(self, subject: str, versions: list[int]) -> None:
        self.connection.execute(
            sa.update(subject_versions)
            .where(_sv.subject == subject, _sv.version.in_(versions))
            .values(deleted=True)
        )

    def hard_delete(self, subject: str, versions: list[int]) -> None:
        self.connection.execute(
            sa.delete(subject_versions).where(_sv.subject == subject, _sv.version.in_(versions))
        )

    def referencing_schema_ids(self, subject: str, version: int) -> list[int]:
        """Ids of schemas that reference (subject, version) and still have a live version."""
        live = sa.exists().where(
            _sv.schema_id == schema_references.c.schema_id, _sv.deleted.is_(False)
        )
        query = (
            sa.select(schema_references.c.schema_id)
            .where(
                schema_references.c.subject == subject,
                schema_references.c.version == version,
                live,
            )
            .distinct()
            .order_by(schema_references.c.schema_id)
        )
        return [int(i) for i in self.connection.execute(query).scalars()]

    # --- config and mode ------------------------------------------------------------------------

    def get_config(self, subject: str) -> ConfigRow | None:
        query = sa.select(configs).where(configs.c.subject == subject)
        row = self.connection.execute(query).first()
        return None if row is None else ConfigRow(row.compatibility, row.normalize)

    def configs_for(self, subject: str) -> dict[str, ConfigRow]:
        """The subject's and the global config rows, keyed by subject (``GLOBAL`` = '')."""
        rows = self.connection.execute(_CONFIGS_FOR, {"s": subject})
        return {r.subject: ConfigRow(r.compatibility, r.normalize) for r in rows}

    def put_config(self, subject: str, config: ConfigRow) -> None:
        self.connection.execute(sa.delete(configs).where(configs.c.subject == subject))
        self.connection.execute(
            sa.insert(configs).values(
                subject=subject, compatibility=config.compatibility, normalize=config.normalize
            )
        )

    def delete_config(self, subject: str) -> None:
        self.connection.execute(sa.delete(configs).where(configs.c.subject == subject))

    def get_mode(self, subject: str) -> str | None:
        query = sa.select(modes.c.mode).where(modes.c.subject == subject)
        found = self.connection.execute(query).scalar()
        return None if found is None else str(found)

    def modes_for(self, subject: str) -> dict[str, str]:
        """The subject's and the global mode, keyed by subject (``GLOBAL`` = '')."""
        rows = self.connection.execute(_MODES_FOR, {"s": subject})
        return {r.subject: str(r.mode) for r in rows}

    def put_mode(self, subject: str, mode: str) -> None:
        self.connection.execute(sa.delete(modes).where(modes.c.subject == subject))
        self.connection.execute(sa.insert(modes).values(subject=subject, mode=mode))

    def delete_mode(self, subject: str) -> None:
        self.connection.execute(sa.delete(modes).where(modes.c.subject == subject))


def _version(row: Any) -> VersionRow:
    return VersionRow(row.subject, int(row.version), SchemaId(row.schema_id), bool(row.deleted))
