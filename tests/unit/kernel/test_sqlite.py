"""A store's SQLite engine: WAL and its pragmas on every connection; writers lock at BEGIN."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from headwater_kernel.sqlite import sqlite_engine


def test_every_connection_is_in_wal_mode_with_the_pragmas_given(tmp_path: Path) -> None:
    engine = sqlite_engine(
        f"sqlite:///{tmp_path / 'store.db'}",
        busy_timeout_s=5,
        pragmas=("synchronous=FULL", "foreign_keys=ON"),
    )
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
            assert conn.execute(sa.text("PRAGMA synchronous")).scalar_one() == 2  # FULL
            assert conn.execute(sa.text("PRAGMA foreign_keys")).scalar_one() == 1
    finally:
        engine.dispose()


def test_an_immediate_transaction_takes_the_write_lock_when_it_begins(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    engine = sqlite_engine(f"sqlite:///{path}", busy_timeout_s=5)
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        # A plain transaction that has read leaves other writers free ...
        with engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SELECT 1")).scalar_one()
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        # ... a writer's holds the lock from BEGIN on, before any statement of its own.
        writer = engine.execution_options(immediate=True)
        with (
            writer.connect() as conn,
            conn.begin(),
            pytest.raises(sqlite3.OperationalError, match="locked"),
        ):
            other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
        engine.dispose()
