"""The metadata store: engine, transactions and the database clock; elections and the change log.

SQLAlchemy Core over PostgreSQL or one SQLite file shared by the brokers of one host (tables in
:mod:`.tables`). The guarantees the cluster rests on are SQL ones:

- **Controller writes** (:meth:`MetadataStore.write_changes`) are one transaction that starts with
  ``UPDATE controller SET last_change = last_change + n WHERE epoch = :mine AND broker_id = :me
  AND last_change = :seen RETURNING last_change``. No row: the transaction rolls back, with
  ``StaleControllerEpochError`` when a newer controller exists, or :class:`ImageBehindError` when
  only ``seen`` (the change the controller's image reflects) is behind. The row lock it takes
  serializes controller transactions, so change offsets are gapless and commit in order.
- **Elections** (:meth:`MetadataStore.campaign`) change the row only ``WHERE lease_until_ms < now``
  on the database's clock, bump the epoch, and log the new controller as a change.
- **SQLite**: WAL, ``synchronous=FULL`` (a lost commit could roll an epoch back), a busy timeout,
  and ``BEGIN IMMEDIATE`` for every write transaction, so writers never upgrade a read lock and
  deadlock. A process stopped (SIGSTOP) inside a write transaction blocks every other writer of
  the file until it resumes or dies: SQLite is for brokers on one host.
- **PostgreSQL**: ``idle_in_transaction_session_timeout`` and ``lock_timeout`` (the stall timeout)
  so a stopped or cut-off process cannot hold the controller row; TCP keepalives so a severed
  link fails instead of hanging.

Threading: every method here blocks; async code awaits :meth:`MetadataStore.call`, which runs it
on the store's own small thread pool (never on the event loop, and never behind disk work queued
on the loop's default executor) and records whether the database answered (:meth:`contact_ms`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from headwater.errors import (
    HeadwaterError,
    MetadataUnavailableError,
    StaleControllerEpochError,
)
from headwater.types import BrokerId, PartitionId
from headwater_broker.cluster import rows
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.changes import (
    Change,
    Mutation,
    PartitionWrite,
    TopicDeletion,
    record_of,
)
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.state import (
    NO_CONTROLLER,
    BrokerState,
    ChangeOffset,
    ControllerEpoch,
    ControllerInfo,
    PartitionState,
    TopicState,
)
from headwater_kernel.sqlite import sqlite_engine

log = logging.getLogger("headwater.broker.cluster")

P = ParamSpec("P")
T = TypeVar("T")

_ROW = 1  # the id of the single row of ``cluster`` and ``controller``
_BOOTSTRAP_LOCK = 0x68656164_77617472  # pg_advisory_xact_lock key: table creation, one at a time


# PostgreSQL: SQLSTATE classes of errors that end a session or a transaction through no fault of
# the statement: 08 connection exception, 25 invalid transaction state (25P03: the server ended
# a transaction left idle past idle_in_transaction_session_timeout -- a broker paused mid-read),
# 40 transaction rollback (serialization failure, deadlock), 53 insufficient resources, 55 lock
# not available (lock_timeout), 57 operator intervention (shutdown, cancel).
_RETRIABLE_SQLSTATE_CLASSES = frozenset({"08", "25", "40", "53", "55", "57"})
# SQLite: primary result codes of a busy, locked, full or failing file (sqlite3 raises them and
# plain SQL errors alike as OperationalError): BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN,
# PROTOCOL.
_RETRIABLE_SQLITE_CODES = frozenset({5, 6, 7, 10, 13, 14, 15})


def metadata_unavailable(exc: BaseException) -> MetadataUnavailableError | None:
    """The one classification of the store's errors: retriable ones as 503 50306, else None.

    Retriable -- the database is away or ended this session, and the same call can succeed on
    another connection: a connection invalidated under a statement; on PostgreSQL every
    ``OperationalError`` / ``InterfaceError`` (a lost or refused connection, a lock or
    statement timeout, a server shutting down) and any error whose SQLSTATE is in a class
    above; on SQLite a busy, locked, full or failing file; a pool that had no connection
    within its timeout, or a connection left in a failed transaction. Everything else (a
    constraint violated, a missing table, a syntax error) is a bug or a refused statement:
    raised as it is, never retried as an outage.
    """
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return _unavailable(exc)
        sqlite_code = getattr(exc.orig, "sqlite_errorcode", None)
        if isinstance(sqlite_code, int):
            return _unavailable(exc) if sqlite_code & 0xFF in _RETRIABLE_SQLITE_CODES else None
        if isinstance(exc, (OperationalError, InterfaceError)):
            return _unavailable(exc)
        sqlstate = getattr(exc.orig, "sqlstate", None) or ""
        return _unavailable(exc) if sqlstate[:2] in _RETRIABLE_SQLSTATE_CLASSES else None
    if isinstance(exc, (sa.exc.TimeoutError, sa.exc.DisconnectionError)):
        return _unavailable(exc)
    if isinstance(exc, sa.exc.PendingRollbackError):
        return _unavailable(exc)
    return None


def _unavailable(exc: sa.exc.SQLAlchemyError) -> MetadataUnavailableError:
    orig = getattr(exc, "orig", None)
    return MetadataUnavailableError(f"The metadata store did not answer: {orig or exc}")


class ImageBehindError(Exception):
    """The controller decided from an image older than the log: it must catch up and decide again.

    Only a bug or two concurrent writers in one controller can cause it; nothing was written.
    """

    def __init__(self, seen: int, last_change: int) -> None:
        super().__init__(f"image at change {seen}, log at {last_change}")
        self.seen = seen
        self.last_change = last_change


@dataclass(frozen=True)
class Election:
    """A won election: the epoch (the fencing token) and the change that recorded it."""

    epoch: ControllerEpoch
    offset: ChangeOffset


@dataclass(frozen=True)
class ControllerRow:
    broker_id: BrokerId
    epoch: ControllerEpoch
    lease_until_ms: int
    last_change: ChangeOffset
    now_ms: int

    @property
    def lease_expired(self) -> bool:
        return self.lease_until_ms < self.now_ms


@dataclass(frozen=True)
class ChangeBatch:
    """Change rows after some offset, and the log's end read just before them."""

    changes: list[Change]
    last_change: ChangeOffset


class MetadataStore:
    """The cluster metadata database of one broker process (thread-safe; methods block)."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 5000,
        stall_timeout_ms: int = 2000,
        threads: int = 4,
        application_name: str = "headwater-broker",
    ) -> None:
        self.url = url
        self.engine = _engine(url, busy_timeout_ms, stall_timeout_ms, application_name)
        self.is_postgres = self.engine.dialect.name == "postgresql"
        self.now: sa.ColumnElement[int] = _clock(self.is_postgres)
        # SQLite allows one writer at a time; this process's writers queue on a lock rather
        # than spin in SQLite's busy handler. Other processes are kept out by BEGIN IMMEDIATE.
        self._sqlite_writer = threading.Lock()
        self._immediate = self.engine.execution_options(immediate=True)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="metadata-store")
        self._contact_since: float | None = None
        self.cluster_id = self._bootstrap()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.engine.dispose()

    # --- async entry and database contact -------------------------------------------------------

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking store function on the store's threads; a lost database becomes 50306."""
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self._executor, functools.partial(fn, *args, **kwargs)
            )
        except HeadwaterError:
            self._answered()
            raise
        except sa.exc.SQLAlchemyError as exc:
            unavailable = metadata_unavailable(exc)
            if unavailable is None:
                raise
            self._contact_since = None
            raise unavailable from exc
        self._answered()
        return result

    def _answered(self) -> None:
        if self._contact_since is None:
            self._contact_since = time.monotonic()

    def contact_ms(self) -> float:
        """Milliseconds of unbroken contact with the database (0 right after a failed call)."""
        since = self._contact_since
        return 0.0 if since is None else (time.monotonic() - since) * 1000

    # --- transactions ---------------------------------------------------------------------------

    @contextmanager
    def read(self, *, consistent: bool = False) -> Iterator[Connection]:
        """A read transaction; ``consistent``: one snapshot for every statement (PostgreSQL
        REPEATABLE READ; a SQLite read transaction always is one)."""
        with self.engine.connect() as conn:
            if consistent and self.is_postgres:
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: BEGIN IMMEDIATE on SQLite, row locks on PostgreSQL."""
        if self.is_postgres:
            with self.engine.connect() as conn, conn.begin():
                yield conn
            return
        with self._sqlite_writer, self._immediate.connect() as conn, conn.begin():
            yield conn

    def now_ms(self, conn: Connection) -> int:
        """The database's clock, in milliseconds since the epoch."""
        return int(conn.execute(sa.select(self.now)).scalar_one())

    def _bootstrap(self) -> str:
        """Create the tables and the single rows if missing; return the cluster id."""
        for attempt in range(20):
            try:
                with self.write() as conn:
                    if self.is_postgres:
                        conn.execute(
                            sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _BOOTSTRAP_LOCK}
                        )
                    t.metadata.create_all(conn, checkfirst=True)
                    row = conn.execute(sa.select(t.cluster).where(t.cluster.c.id == _ROW)).first()
                    if row is not None:
                        if row.schema_version != t.SCHEMA_VERSION:
                            raise RuntimeError(
                                f"metadata schema version {row.schema_version}, this broker "
                                f"speaks {t.SCHEMA_VERSION}"
                            )
                        return str(row.cluster_id)
                    cluster_id = str(uuid.uuid4())
                    conn.execute(
                        sa.insert(t.cluster).values(
                            id=_ROW,
                            cluster_id=cluster_id,
                            next_producer_id=0,
                            schema_version=t.SCHEMA_VERSION,
                        )
                    )
                    conn.execute(
                        sa.insert(t.controller).values(
                            id=_ROW,
                            broker_id=NO_CONTROLLER,
                            epoch=0,
                            lease_until_ms=0,
                            last_change=0,
                        )
                    )
                    return cluster_id
            except DBAPIError:
                # Two processes creating the tables at once: the loser retries and finds them.
                if attempt == 19:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    # --- the controller row: elections and leases -----------------------------------------------

    def read_controller(self) -> ControllerRow:
        with self.read() as conn:
            row = conn.execute(
                sa.select(t.controller, self.now.label("now_ms")).where(t.controller.c.id == _ROW)
            ).one()
        return ControllerRow(
            BrokerId(row.broker_id),
            ControllerEpoch(row.epoch),
            int(row.lease_until_ms),
            ChangeOffset(row.last_change),
            int(row.now_ms),
        )

    def campaign(self, broker_id: int, lease_ms: int) -> Election | None:
        """Take the controller lease if it has expired (database clock); None if it has not."""
        if not self.read_controller().lease_expired:
            return None  # the common case answered without taking SQLite's write lock
        c = t.controller.c
        with self.write() as conn:
            won = conn.execute(
                sa.update(t.controller)
                .where(c.id == _ROW, c.lease_until_ms < self.now)
                .values(
                    broker_id=broker_id,
                    epoch=c.epoch + 1,
                    lease_until_ms=self.now + lease_ms,
                    last_change=c.last_change + 1,
                )
                .returning(c.epoch, c.last_change)
            ).first()
            if won is None:
                return None
            election = Election(ControllerEpoch(won.epoch), ChangeOffset(won.last_change))
            record = ControllerInfo(BrokerId(broker_id), election.epoch)
            self._insert_changes(conn, [Change(election.offset, election.epoch, record)])
        return election

    def renew(self, broker_id: int, epoch: int, lease_ms: int) -> bool:
        """Extend the lease of controller ``epoch``; False if that epoch is no longer current."""
        c = t.controller.c
        with self.write() as conn:
            renewed = conn.execute(
                sa.update(t.controller)
                .where(c.id == _ROW, c.epoch == epoch, c.broker_id == broker_id)
                .values(lease_until_ms=self.now + lease_ms)
            )
            return renewed.rowcount == 1

    def resign(self, broker_id: int, epoch: int) -> Change:
        """Give the lease up at once (clean shutdown), logging that there is no controller."""
        with self.write() as conn:
            offset = self._cas(conn, epoch, broker_id, None, 1)
            conn.execute(
                sa.update(t.controller)
                .where(t.controller.c.id == _ROW)
                .values(broker_id=NO_CONTROLLER, lease_until_ms=0)
            )
            change = Change(
                offset,
                ControllerEpoch(epoch),
                ControllerInfo(NO_CONTROLLER, ControllerEpoch(epoch)),
            )
            self._insert_changes(conn, [change])
        return change

    # --- controller writes ----------------------------------------------------------------------

    def _cas(
        self, conn: Connection, epoch: int, broker_id: int, seen: int | None, n: int
    ) -> ChangeOffset:
        """The first statement of every controller transaction; returns its last change offset."""
        c = t.controller.c
        guard = [c.id == _ROW, c.epoch == epoch, c.broker_id == broker_id]
        if seen is not None:
            guard.append(c.last_change == seen)
        last = conn.execute(
            sa.update(t.controller)
            .where(*guard)
            .values(last_change=c.last_change + n)
            .returning(c.last_change)
        ).scalar()
        if last is not None:
            return ChangeOffset(int(last))
        current = conn.execute(sa.select(t.controller).where(c.id == _ROW)).one()
        if current.epoch != epoch or current.broker_id != broker_id:
            raise StaleControllerEpochError(
                f"Controller epoch {epoch} of broker {broker_id} is stale: the controller is "
                f"broker {current.broker_id} at epoch {current.epoch}"
            )
        raise ImageBehindError(int(seen if seen is not None else -1), int(current.last_change))

    def write_changes(
        self, epoch: int, broker_id: int, seen: int, mutations: Sequence[Mutation]
    ) -> list[Change]:
        """One controller transaction: the epoch CAS, the table rows, and one change per mutation.

        ``seen`` is the change the caller's image reflects; the new changes are ``seen + 1 ..``.
        Raises ``StaleControllerEpochError``, :class:`ImageBehindError` or
        ``StalePartitionEpochError``; each rolls everything back.
        """
        with self.write() as conn:
            last = self._cas(conn, epoch, broker_id, seen, len(mutations))
            first = last - len(mutations) + 1
            changes = [
                Change(ChangeOffset(first + i), ControllerEpoch(epoch), record_of(m))
                for i, m in enumerate(mutations)
            ]
            self._write_rows(conn, mutations)
            self._insert_changes(conn, changes)
        return changes

    def prune_changes(self, epoch: int, broker_id: int, older_than_ms: int) -> int:
        """Delete changes older than ``older_than_ms`` (database clock), keeping the newest."""
        ch = t.changes.c
        with self.write() as conn:
            last = self._cas(conn, epoch, broker_id, None, 0)
            deleted = conn.execute(
                sa.delete(t.changes).where(
                    ch.created_ms < self.now - older_than_ms, ch.offset < last
                )
            )
            return int(deleted.rowcount)

    def _insert_changes(self, conn: Connection, changes: Sequence[Change]) -> None:
        if not changes:
            return
        values = [
            {
                "offset": c.offset,
                "controller_epoch": c.controller_epoch,
                "kind": c.kind.value,
                "body": orjson.dumps(c.record.to_body()).decode(),
            }
            for c in changes
        ]
        conn.execute(sa.insert(t.changes).values(created_ms=self.now), values)

    def _write_rows(self, conn: Connection, mutations: Sequence[Mutation]) -> None:
        new_partitions: list[dict[str, Any]] = []

        def flush() -> None:
            if new_partitions:
                conn.execute(sa.insert(t.partitions), new_partitions)
                new_partitions.clear()

        for mutation in mutations:
            if isinstance(mutation, PartitionWrite) and mutation.before is None:
                new_partitions.append(rows.partition_row(mutation.after))
                continue
            flush()
            if isinstance(mutation, PartitionWrite):
                rows.update_partition(conn, mutation)
            elif isinstance(mutation, BrokerState):
                rows.upsert(
                    conn, t.brokers, {"broker_id": mutation.broker_id}, rows.broker_row(mutation)
                )
            elif isinstance(mutation, TopicState):
                key = {"name": mutation.name, "topic_id": mutation.topic_id}
                rows.upsert(conn, t.topics, key, rows.topic_row(mutation))
            elif isinstance(mutation, TopicDeletion):
                conn.execute(
                    sa.delete(t.partitions).where(t.partitions.c.topic_id == mutation.topic_id)
                )
                conn.execute(
                    sa.delete(t.topics).where(
                        t.topics.c.name == mutation.name, t.topics.c.topic_id == mutation.topic_id
                    )
                )
        flush()

    # --- reading the log and snapshots ----------------------------------------------------------

    def read_changes(self, after: int, limit: int = 1000) -> ChangeBatch:
        """Up to ``limit`` changes after offset ``after``, in order.

        The log's end is read first: if it is past ``after`` and the rows do not start at
        ``after + 1``, the rows in between were pruned and the reader must reload a snapshot.
        """
        with self.read() as conn:
            last = conn.execute(
                sa.select(t.controller.c.last_change).where(t.controller.c.id == _ROW)
            ).scalar_one()
            found = conn.execute(
                sa.select(t.changes)
                .where(t.changes.c.offset > after)
                .order_by(t.changes.c.offset)
                .limit(limit)
            ).all()
        return ChangeBatch([rows.change(r) for r in found], ChangeOffset(int(last)))

    def read_snapshot(self) -> MetadataImage:
        """The whole image, from one consistent read, at the log's current end."""
        with self.read(consistent=True) as conn:
            cluster_id = conn.execute(sa.select(t.cluster.c.cluster_id)).scalar_one()
            ctl = conn.execute(sa.select(t.controller).where(t.controller.c.id == _ROW)).one()
            broker_rows = conn.execute(sa.select(t.brokers)).all()
            topic_rows = conn.execute(sa.select(t.topics)).all()
            partition_rows = conn.execute(sa.select(t.partitions)).all()
        brokers = {BrokerId(r.broker_id): rows.broker_state(r) for r in broker_rows}
        topics = {str(r.name): rows.topic_state(r) for r in topic_rows}
        partitions: dict[str, dict[PartitionId, PartitionState]] = {}
        for r in partition_rows:
            state = rows.partition_state(r)
            partitions.setdefault(state.topic, {})[state.partition] = state
        return MetadataImage(
            offset=ChangeOffset(int(ctl.last_change)),
            cluster_id=str(cluster_id),
            controller=ControllerInfo(BrokerId(ctl.broker_id), ControllerEpoch(ctl.epoch)),
            brokers=brokers,
            topics=topics,
            partitions=partitions,
        )

    def read_all_changes(self) -> list[Change]:
        """The whole change log in order (for tests and tools; a live broker reads by offset)."""
        return self.read_changes(0, limit=2**31 - 1).changes


def _clock(is_postgres: bool) -> sa.ColumnElement[int]:
    """Milliseconds since the epoch on the database's clock, read when the statement runs."""
    if is_postgres:
        # clock_timestamp(), not now(): now() is frozen at the start of the transaction.
        return sa.cast(
            sa.func.floor(sa.extract("epoch", sa.func.clock_timestamp()) * 1000), sa.BigInteger
        )
    return sa.cast((sa.func.julianday("now") - 2440587.5) * 86_400_000.0, sa.BigInteger)


def _engine(url: str, busy_timeout_ms: int, stall_timeout_ms: int, application_name: str) -> Engine:
    if not url.startswith("sqlite"):
        connect_args: dict[str, Any] = {
            "connect_timeout": 3,
            # Names the broker in pg_stat_activity (which broker holds a lock, or a transaction).
            "application_name": application_name,
            # A session stopped inside a transaction (SIGSTOP, a severed link) would hold the
            # controller row lock forever: the server ends it after the stall timeout instead.
            "options": (
                f"-c idle_in_transaction_session_timeout={stall_timeout_ms} "
                f"-c lock_timeout={stall_timeout_ms}"
            ),
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
            "tcp_user_timeout": 10_000,
        }
        return sa.create_engine(
            url, pool_size=5, max_overflow=5, pool_pre_ping=True, connect_args=connect_args
        )
    database = sa.engine.make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    # synchronous=FULL: a commit survives power loss. A lost commit could hand out an epoch twice.
    return sqlite_engine(url, busy_timeout_s=busy_timeout_ms / 1000, pragmas=("synchronous=FULL",))
