"""The registry's SQL store: tables, versioned migrations, transactions, the core's queries.

SQLAlchemy Core over a SQLite file (default) or PostgreSQL (several registry processes may share
one). Tables::

    schemas            id PK | schema_type | schema_text | refs (JSON) | fingerprint UNIQUE
                       | normalized_fingerprint (indexed)   -- never deleted: ids outlive subjects
    subject_versions   (subject, version) PK | schema_id | deleted (soft delete)
                       indexed by schema_id and by (subject, schema_id)
    schema_references  (schema_id, position) PK | name | subject | version  (indexed by target)
    configs            subject PK ('' = global) | compatibility | normalize
    modes              subject PK ('' = global) | mode
    counters           name PK | value   -- 'schema_id': the last global id handed out
    schema_migrations  version PK | name | applied_at

Concurrency: every write runs in one transaction that first serializes on its subject
(PostgreSQL: ``pg_advisory_xact_lock`` on a hash of the subject; SQLite: ``BEGIN IMMEDIATE``
serializes all writers), so version numbers and compatibility checks see the latest state. New ids
come from the ``counters`` row, whose row lock orders concurrent allocations; the unique
fingerprint catches two subjects registering the same new schema at once, and the core retries
that transaction (:data:`RETRYABLE`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from headwater.registry.schema import SchemaReference
from headwater.types import SchemaId

GLOBAL = ""
"""The ``subject`` key of the global config and mode rows (no subject may be empty)."""

RETRYABLE = (IntegrityError, OperationalError)

metadata = sa.MetaData()

schemas = sa.Table(
    "schemas",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("schema_type", sa.String(16), nullable=False),
    sa.Column("schema_text", sa.Text, nullable=False),
    sa.Column("refs", sa.Text, nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
    sa.Column("normalized_fingerprint", sa.String(64), nullable=False, index=True),
)

subject_versions = sa.Table(
    "subject_versions",
    metadata,
    sa.Column("subject", sa.String(512), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("schema_id", sa.Integer, sa.ForeignKey("schemas.id"), nullable=False, index=True),
    sa.Column("deleted", sa.Boolean, nullable=False, default=False),
)

subject_schema_index = sa.Index(
    "ix_subject_versions_subject_schema", subject_versions.c.subject, subject_versions.c.schema_id
)

schema_references = sa.Table(
    "schema_references",
    metadata,
    sa.Column("schema_id", sa.Integer, sa.ForeignKey("schemas.id"), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(512), nullable=False),
    sa.Column("subject", sa.String(512), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Index("ix_schema_references_target", "subject", "version"),
)

configs = sa.Table(
    "configs",
    metadata,
    sa.Column("subject", sa.String(512), primary_key=True),
    sa.Column("compatibility", sa.String(32), nullable=True),
    sa.Column("normalize", sa.Boolean, nullable=True),
)

modes = sa.Table(
    "modes",
    metadata,
    sa.Column("subject", sa.String(512), primary_key=True),
    sa.Column("mode", sa.String(32), nullable=False),
)

counters = sa.Table(
    "counters",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)


def _create_tables(conn: Connection) -> None:
    metadata.create_all(
        conn, tables=[schemas, subject_versions, schema_references, configs, modes], checkfirst=True
    )


def _create_counters(conn: Connection) -> None:
    counters.create(conn, checkfirst=True)
    last = conn.execute(sa.select(sa.func.coalesce(sa.func.max(schemas.c.id), 0))).scalar_one()
    conn.execute(sa.insert(counters).values(name="schema_id", value=last))


def _index_subject_schema(conn: Connection) -> None:
    subject_schema_index.create(conn, checkfirst=True)


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "schemas, subject versions, references, configs, modes", _create_tables),
    (2, "id counter row for concurrent id allocation", _create_counters),
    (3, "index (subject, schema_id) for lookups", _index_subject_schema),
]
"""Applied in order, each once, recorded in ``schema_migrations``; append, never edit."""

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


@dataclass(frozen=True)
class StoredSchema:
    """A row of ``schemas``: immutable once written, so safe to cache in any process."""

    id: SchemaId
    schema_type: str
    text: str
    references: tuple[SchemaReference, ...]


@dataclass(frozen=True)
class VersionRow:
    subject: str
    version: int
    schema_id: SchemaId
    deleted: bool


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class SQLStore:
    """Registry state in one SQL database; every method runs inside a caller's transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _engine(url)
        self.is_postgres = self.engine.dialect.name == "postgresql"
        # SQLite allows one writer at a time; queueing this process's writers on a lock is far
        # cheaper than letting them spin in SQLite's sleeping busy handler. Other processes are
        # still kept out by BEGIN IMMEDIATE.
        self._sqlite_writer = threading.Lock()
        self._immediate = self.engine.execution_options(immediate=True)
        self.migrate()

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self, *subjects: str) -> Iterator[Connection]:
        """A write transaction serialized against other writers of the same subjects."""
        if self.is_postgres:
            with self.engine.connect() as conn, conn.begin():
                for key in sorted({_lock_key(s) for s in subjects}):
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                yield conn
            return
        with self._sqlite_writer, self._immediate.connect() as conn, conn.begin():
            yield conn

    def migrate(self) -> None:
        """Apply the migrations this database lacks (one process at a time)."""
        for attempt in range(20):
            try:
                with self.write("headwater-registry-migrations") as conn:
                    schema_migrations.create(conn, checkfirst=True)
                    done = set(conn.execute(sa.select(schema_migrations.c.version)).scalars())
                    for version, name, apply in MIGRATIONS:
                        if version not in done:
                            apply(conn)
                            conn.execute(
                                sa.insert(schema_migrations).values(
                                    version=version, name=name, applied_at=time.time()
                                )
                            )
                return
            except DBAPIError:
                # Two processes creating the tables at once: the loser retries and finds them.
                if attempt == 19:
                    raise
                time.sleep(0.05 * (attempt + 1))

    # --- schemas --------------------------------------------------------------------------------

    def get_schema(self, conn: Connection, schema_id: int) -> StoredSchema | None:
        row = conn.execute(_SCHEMA_BY_ID, {"id": schema_id}).first()
        if row is None:
            return None
        refs = tuple(SchemaReference(**r) for r in orjson.loads(row.refs))
        return StoredSchema(SchemaId(row.id), row.schema_type, row.schema_text, refs)

    def find_schema_id(self, conn: Connection, fingerprint: str) -> SchemaId | None:
        found = conn.execute(_ID_BY_FINGERPRINT, {"fp": fingerprint}).scalar()
        return None if found is None else SchemaId(found)

    def find_normalized_versions(
        self, conn: Connection, subject: str, normalized_fingerprint: str
    ) -> list[VersionRow]:
        rows = conn.execute(_NORMALIZED_VERSIONS, {"s": subject, "fp": normalized_fingerprint})
        return [_version(r) for r in rows]

    def allocate_id(self, conn: Connection) -> SchemaId:
        return SchemaId(conn.execute(_NEXT_ID).scalar_one())

    def raise_counter(self, conn: Connection, at_least: int) -> None:
        conn.execute(
            sa.update(counters)
            .where(counters.c.name == "schema_id", counters.c.value < at_least)
            .values(value=at_least)
        )

    def insert_schema(
        self,
        conn: Connection,
        schema_id: int,
        schema_type: str,
        text: str,
        references: tuple[SchemaReference, ...],
        fingerprint: str,
        normalized_fingerprint: str,
    ) -> None:
        row = {
            "id": schema_id,
            "schema_type": schema_type,
            "schema_text": text,
            "refs": orjson.dumps([r.to_dict() for r in references]).decode(),
            "fingerprint": fingerprint,
            "normalized_fingerprint": normalized_fingerprint,
        }
        conn.execute(_INSERT_SCHEMA, row)
        if references:
            conn.execute(
                sa.insert(schema_references),
                [
                    {"schema_id": schema_id, "position": i, **r.to_dict()}
                    for i, r in enumerate(references)
                ],
            )

    # --- subject versions -----------------------------------------------------------------------

    def versions(self, conn: Connection, subject: str) -> list[VersionRow]:
        """All versions of a subject, soft-deleted ones included, oldest first."""
        return [_version(r) for r in conn.execute(_VERSIONS, {"s": subject})]

    def version(self, conn: Connection, subject: str, version: int) -> VersionRow | None:
        """One version of a subject (soft-deleted or not), None if it does not exist."""
        row = conn.execute(_ONE_VERSION, {"s": subject, "v": version}).first()
        return None if row is None else _version(row)

    def latest_version(self, conn: Connection, subject: str) -> VersionRow | None:
        """The newest live version; the newest soft-deleted one if none is live; None if none."""
        row = conn.execute(_LATEST_VERSION, {"s": subject}).first()
        return None if row is None else _version(row)

    def has_versions(self, conn: Connection, subject: str, include_deleted: bool) -> bool:
        query = _ANY_VERSION if include_deleted else _ANY_LIVE_VERSION
        return conn.execute(query, {"s": subject}).first() is not None

    def subject_versions_of_schema(
        self, conn: Connection, subject: str, schema_id: int
    ) -> list[VersionRow]:
        rows = conn.execute(_SUBJECT_VERSIONS_OF_SCHEMA, {"s": subject, "id": schema_id})
        return [_version(r) for r in rows]

    def versions_of_schema(self, conn: Connection, schema_id: int) -> list[VersionRow]:
        query = (
            sa.select(subject_versions)
            .where(subject_versions.c.schema_id == schema_id)
            .order_by(subject_versions.c.subject, subject_versions.c.version)
        )
        return [_version(r) for r in conn.execute(query)]

    def all_versions(self, conn: Connection, prefix: str) -> list[VersionRow]:
        query = sa.select(subject_versions).order_by(
            subject_versions.c.subject, subject_versions.c.version
        )
        if prefix:
            query = query.where(subject_versions.c.subject.startswith(prefix, autoescape=True))
        return [_version(r) for r in conn.execute(query)]

    def subjects(self, conn: Connection, prefix: str) -> list[tuple[str, int, int]]:
        """(subject, live versions, all versions) for every subject with any version."""
        live = sa.func.sum(sa.case((subject_versions.c.deleted, 0), else_=1))
        query = (
            sa.select(subject_versions.c.subject, live, sa.func.count())
            .group_by(subject_versions.c.subject)
            .order_by(subject_versions.c.subject)
        )
        if prefix:
            query = query.where(subject_versions.c.subject.startswith(prefix, autoescape=True))
        return [(r[0], int(r[1]), int(r[2])) for r in conn.execute(query)]

    def insert_version(self, conn: Connection, subject: str, version: int, schema_id: int) -> None:
        conn.execute(
            _INSERT_VERSION, {"subject": subject, "version": version, "schema_id": schema_id}
        )

    def soft_delete(self, conn: Connection, subject: str, versions: list[int]) -> None:
        conn.execute(
            sa.update(subject_versions)
            .where(subject_versions.c.subject == subject, subject_versions.c.version.in_(versions))
            .values(deleted=True)
        )

    def hard_delete(self, conn: Connection, subject: str, versions: list[int]) -> None:
        conn.execute(
            sa.delete(subject_versions).where(
                subject_versions.c.subject == subject, subject_versions.c.version.in_(versions)
            )
        )

    def referencing_schema_ids(self, conn: Connection, subject: str, version: int) -> list[int]:
        """Ids of schemas that reference (subject, version) and still have a live version."""
        live = sa.exists().where(
            subject_versions.c.schema_id == schema_references.c.schema_id,
            subject_versions.c.deleted.is_(False),
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
        return [int(i) for i in conn.execute(query).scalars()]

    # --- config and mode ------------------------------------------------------------------------

    def get_config(self, conn: Connection, subject: str) -> tuple[str | None, bool | None] | None:
        row = conn.execute(sa.select(configs).where(configs.c.subject == subject)).first()
        return None if row is None else (row.compatibility, row.normalize)

    def configs_for(
        self, conn: Connection, subject: str
    ) -> dict[str, tuple[str | None, bool | None]]:
        """The subject's and the global config rows, keyed by subject (``GLOBAL`` = '')."""
        rows = conn.execute(_CONFIGS_FOR, {"s": subject})
        return {r.subject: (r.compatibility, r.normalize) for r in rows}

    def modes_for(self, conn: Connection, subject: str) -> dict[str, str]:
        return {r.subject: str(r.mode) for r in conn.execute(_MODES_FOR, {"s": subject})}

    def put_config(
        self, conn: Connection, subject: str, compatibility: str | None, normalize: bool | None
    ) -> None:
        conn.execute(sa.delete(configs).where(configs.c.subject == subject))
        conn.execute(
            sa.insert(configs).values(
                subject=subject, compatibility=compatibility, normalize=normalize
            )
        )

    def delete_config(self, conn: Connection, subject: str) -> None:
        conn.execute(sa.delete(configs).where(configs.c.subject == subject))

    def get_mode(self, conn: Connection, subject: str) -> str | None:
        found = conn.execute(sa.select(modes.c.mode).where(modes.c.subject == subject)).scalar()
        return None if found is None else str(found)

    def put_mode(self, conn: Connection, subject: str, mode: str) -> None:
        conn.execute(sa.delete(modes).where(modes.c.subject == subject))
        conn.execute(sa.insert(modes).values(subject=subject, mode=mode))

    def delete_mode(self, conn: Connection, subject: str) -> None:
        conn.execute(sa.delete(modes).where(modes.c.subject == subject))

    def ping(self) -> None:
        with self.read() as conn:
            conn.execute(sa.text("SELECT 1"))


def _version(row: Any) -> VersionRow:
    return VersionRow(row.subject, int(row.version), SchemaId(row.schema_id), bool(row.deleted))


def _engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return sa.create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
    database = sa.engine.make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling is off so BEGIN IMMEDIATE below takes effect.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Connection) -> None:
        # Writers take the database lock up front: no lock upgrade, so no deadlock between them.
        immediate = conn.get_execution_options().get("immediate", False)
        # Straight to the driver: this runs for every transaction, and SQLAlchemy's statement
        # machinery would cost more than SQLite's BEGIN itself.
        conn.connection.dbapi_connection.execute(  # type: ignore[union-attr]
            "BEGIN IMMEDIATE" if immediate else "BEGIN"
        )

    return engine
