"""The registry's database: engines, transactions and what serialises writers, migrations at open.

SQLAlchemy Core over a SQLite file (default) or PostgreSQL (several registry processes may share
one). Every write runs in one transaction that first serialises on its subjects (PostgreSQL:
``pg_advisory_xact_lock`` on a hash of each subject; SQLite: one writer at a time, queued on a
process lock and then ``BEGIN IMMEDIATE`` against other processes), so version numbers and
compatibility checks see the latest state. New ids come from the ``counters`` row, whose row lock
orders concurrent allocations; the unique fingerprint catches two subjects registering the same
new schema at once, and :meth:`SQLStore.write` runs that transaction again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from headwater.registry.errors import StoreTimeoutError
from headwater_kernel.sqlite import sqlite_engine
from headwater_registry.store.queries import Transaction
from headwater_registry.store.tables import MIGRATIONS, schema_migrations

T = TypeVar("T")

# What a concurrent writer can make a write transaction fail with (the unique fingerprint, a
# serialization failure, a busy SQLite file): worth running again.
_RETRYABLE = (IntegrityError, OperationalError)
WRITE_ATTEMPTS = 30


class SQLStore:
    """Registry state in one SQL database: read transactions, serialised and retried writes."""

    def __init__(self, url: str, write_attempts: int = WRITE_ATTEMPTS) -> None:
        if write_attempts < 1:
            raise ValueError(f"write_attempts must be at least 1, got {write_attempts}")
        self.engine = _engine(url)
        self.write_attempts = write_attempts
        self.is_postgres = self.engine.dialect.name == "postgresql"
        # SQLite allows one writer at a time; queueing this process's writers on a lock is far
        # cheaper than letting them spin in SQLite's sleeping busy handler. Other processes are
        # still kept out by BEGIN IMMEDIATE.
        self._sqlite_writer = threading.Lock()
        self._immediate = self.engine.execution_options(immediate=True)

    def open(self) -> None:
        """Create the SQLite file's directory and apply the migrations the database lacks."""
        database = self.engine.url.database
        if not self.is_postgres and database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        self._migrate()

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        with self.engine.connect() as conn, conn.begin():
            yield Transaction(conn)

    def write(self, work: Callable[[Transaction], T], *subjects: str) -> T:
        """``work`` in a write transaction serialised against other writers of ``subjects``.

        Run again when a concurrent writer made the transaction conflict; after
        ``write_attempts`` attempts (about 2.5 s of pauses for the default 30),
        :class:`StoreTimeoutError` (50002).
        """
        attempts = self.write_attempts
        for n in range(attempts):
            try:
                with self._locked(*subjects) as conn:
                    return work(Transaction(conn))
            except _RETRYABLE as e:
                if n == attempts - 1:
                    raise StoreTimeoutError(
                        f"Gave up after {attempts} conflicting attempts: {e}"
                    ) from e
                time.sleep(min(0.002 * (2**n), 0.1))
        raise AssertionError("unreachable")

    @contextmanager
    def _locked(self, *subjects: str) -> Iterator[Connection]:
        if self.is_postgres:
            with self.engine.connect() as conn, conn.begin():
                for key in sorted({_lock_key(s) for s in subjects}):
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
                yield conn
            return
        with self._sqlite_writer, self._immediate.connect() as conn, conn.begin():
            yield conn

    def _migrate(self) -> None:
        """Apply the migrations this database lacks (one process at a time)."""
        for attempt in range(20):
            try:
                with self._locked("headwater-registry-migrations") as conn:
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

    def ping(self) -> None:
        with self.engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SELECT 1"))


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return sa.create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)
    return sqlite_engine(url, busy_timeout_s=30, pragmas=("synchronous=NORMAL", "foreign_keys=ON"))
