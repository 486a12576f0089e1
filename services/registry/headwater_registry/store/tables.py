"""The registry's tables and their versioned migrations (SQLAlchemy Core metadata).

::

    schemas            id PK | schema_type | schema_text | refs (JSON) | fingerprint UNIQUE
                       | normalized_fingerprint (indexed)   -- never deleted: ids outlive subjects
    subject_versions   (subject, version) PK | schema_id | deleted (soft delete)
                       indexed by schema_id and by (subject, schema_id)
    schema_references  (schema_id, position) PK | name | subject | version  (indexed by target)
    configs            subject PK ('' = global) | compatibility | normalize
    modes              subject PK ('' = global) | mode
    counters           name PK | value   -- 'schema_id': the last global id handed out
    schema_migrations  version PK | name | applied_at
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

GLOBAL = ""
"""The ``subject`` key of the global config and mode rows (no subject may be empty)."""

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


class Migration(NamedTuple):
    version: int
    name: str
    apply: Callable[[Connection], None]


MIGRATIONS = [
    Migration(1, "schemas, subject versions, references, configs, modes", _create_tables),
    Migration(2, "id counter row for concurrent id allocation", _create_counters),
    Migration(3, "index (subject, schema_id) for lookups", _index_subject_schema),
]
"""Applied in order, each once, recorded in ``schema_migrations``; append, never edit."""
