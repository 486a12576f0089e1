"""``sqlite_engine``: a SQLAlchemy engine on a SQLite file whose writers never deadlock.

The broker's cluster store and the registry's store both keep their state in SQLite by default.
Their transactions begin with ``BEGIN``; on a connection of
``engine.execution_options(immediate=True)`` they begin with ``BEGIN IMMEDIATE`` instead, so a
writer takes the database's write lock up front and never has to upgrade a read lock (two writers
upgrading at once deadlock until one times out). pysqlite's own transaction handling is turned off
for that, and every connection runs in WAL mode.

SQLAlchemy only, no web framework: the services' storage modules import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine


def sqlite_engine(url: str, *, busy_timeout_s: float, pragmas: Sequence[str] = ()) -> Engine:
    """An engine on the SQLite database at ``url``: WAL mode, then ``PRAGMA`` each of ``pragmas``
    (``"synchronous=FULL"``) on every new connection; a busy database is waited for up to
    ``busy_timeout_s``. Connections may be used from any thread."""
    engine = sa.create_engine(
        url, connect_args={"timeout": busy_timeout_s, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling is off so BEGIN IMMEDIATE below takes effect.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        for pragma in pragmas:
            cursor.execute(f"PRAGMA {pragma}")
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
