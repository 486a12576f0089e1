"""A broker's session with the cluster: registration, heartbeats (broker epoch), release.

The broker writes only its own ``broker_sessions`` row; the controller reads those rows and records
what it concludes (registered, fenced, active) in ``brokers`` and the change log.

- **Register**: a new incarnation id (uuid per process) and ``epoch + 1`` — refused with
  ``BrokerIdInUseError`` while a *different* incarnation of the same id heartbeats within the
  session timeout. ``wait_ms`` retries that refusal, so a broker restarted right after a kill -9
  gets its id back once the dead process's session has expired, while a second live process with
  the same id is still refused.
- **Heartbeat**: ``UPDATE ... WHERE incarnation = :mine AND epoch = :mine`` with the change the
  broker has applied. No row: this incarnation was replaced -> ``StaleBrokerEpochError``, and the
  broker must stop serving.
- **Reports**: with a heartbeat, the leaders the broker has had no fetch answer from for a while
  (``peer_reports``); the controller moves a leader's partitions when all of their other
  in-sync replicas report it (``election.cut_off_leader``).
- **Release** (clean shutdown): the heartbeat is zeroed so the controller fences the broker at once
  and the same id can register again immediately.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from headwater.errors import BrokerIdInUseError, StaleBrokerEpochError
from headwater.types import BrokerId
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.state import BrokerEpoch, ChangeOffset
from headwater_broker.cluster.store import MetadataStore


@dataclass(frozen=True)
class SessionRow:
    """One broker's ``broker_sessions`` row, as the controller reads it."""

    broker_id: BrokerId
    incarnation: str
    epoch: BrokerEpoch
    url: str
    rack: str | None
    heartbeat_ms: int  # 0 = released by a clean shutdown
    applied_change: ChangeOffset
    unreachable: frozenset[BrokerId] = frozenset()
    """Leaders this incarnation reports it cannot fetch from (``peer_reports``)."""

    @property
    def released(self) -> bool:
        return self.heartbeat_ms == 0


@dataclass(frozen=True)
class Registration:
    broker_id: BrokerId
    incarnation: str
    epoch: BrokerEpoch


def register(
    store: MetadataStore,
    broker_id: int,
    url: str,
    rack: str | None,
    session_timeout_ms: int,
    incarnation: str | None = None,
) -> Registration:
    """Write this process's session row with a fresh incarnation and the next broker epoch."""
    incarnation = incarnation or str(uuid.uuid4())
    s = t.broker_sessions.c
    for attempt in range(5):
        try:
            with store.write() as conn:
                query = sa.select(t.broker_sessions, store.now.label("now_ms")).where(
                    s.broker_id == broker_id
                )
                if store.is_postgres:
                    query = query.with_for_update()
                row = conn.execute(query).first()
                recorded = conn.execute(
                    sa.select(t.brokers.c.epoch).where(t.brokers.c.broker_id == broker_id)
                ).scalar()
                now = int(row.now_ms) if row is not None else store.now_ms(conn)
                if row is not None and row.incarnation != incarnation:
                    age = now - int(row.heartbeat_ms)
                    if row.heartbeat_ms != 0 and age <= session_timeout_ms:
                        raise BrokerIdInUseError(
                            f"Broker id {broker_id} is in use by a live broker at {row.url} "
                            f"(incarnation {row.incarnation}, epoch {row.epoch}, last heartbeat "
                            f"{age} ms ago); stop it or give this broker another id"
                        )
                # Above both what this id's sessions and what the controller recorded have seen.
                epoch = max(int(row.epoch) if row is not None else 0, int(recorded or 0)) + 1
                values = {
                    "incarnation": incarnation,
                    "epoch": epoch,
                    "url": url,
                    "rack": rack,
                    "heartbeat_ms": now,
                    "applied_change": 0,
                }
                if row is None:
                    conn.execute(sa.insert(t.broker_sessions).values(broker_id=broker_id, **values))
                else:
                    conn.execute(
                        sa.update(t.broker_sessions).where(s.broker_id == broker_id).values(values)
                    )
            return Registration(BrokerId(broker_id), incarnation, BrokerEpoch(epoch))
        except IntegrityError:
            # Another process inserted the first row for this id at the same moment (PostgreSQL):
            # read it again, and be refused if it is live.
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def heartbeat(
    store: MetadataStore,
    me: Registration,
    applied_change: int,
    unreachable: Sequence[int] | None = None,
) -> ChangeOffset:
    """Refresh this incarnation's heartbeat (database clock) and report the applied change;
    return the change log's end (``controller.last_change``), so the broker can tell how far
    behind its image is even when its metadata follower cannot poll.

    ``unreachable`` (when it changed since the last heartbeat): the leaders this broker has had
    no fetch answer from for ``BROKER_REPLICA_FETCH_TIMEOUT_MS``, written to ``peer_reports`` in
    the same transaction; the controller reads them with the sessions.
    """
    s = t.broker_sessions.c
    with store.write() as conn:
        if unreachable is not None:
            _write_report(conn, me, unreachable)
        updated = conn.execute(
            sa.update(t.broker_sessions)
            .where(
                s.broker_id == me.broker_id,
                s.incarnation == me.incarnation,
                s.epoch == me.epoch,
            )
            .values(heartbeat_ms=store.now, applied_change=applied_change)
        )
        if updated.rowcount == 1:
            return ChangeOffset(conn.execute(sa.select(t.controller.c.last_change)).scalar_one())
        row = conn.execute(sa.select(t.broker_sessions).where(s.broker_id == me.broker_id)).first()
    now_held = (
        "nobody" if row is None else f"incarnation {row.incarnation} epoch {row.epoch} at {row.url}"
    )
    raise StaleBrokerEpochError(
        f"Broker {me.broker_id} incarnation {me.incarnation} epoch {me.epoch} was replaced: the "
        f"id is now held by {now_held}"
    )


def _write_report(conn: sa.Connection, me: Registration, unreachable: Sequence[int]) -> None:
    r = t.peer_reports.c
    values = {"epoch": me.epoch, "unreachable": orjson.dumps(sorted(unreachable)).decode()}
    updated = conn.execute(
        sa.update(t.peer_reports).where(r.broker_id == me.broker_id).values(values)
    )
    if updated.rowcount == 0:
        conn.execute(sa.insert(t.peer_reports).values(broker_id=me.broker_id, **values))


def release(store: MetadataStore, me: Registration) -> bool:
    """Mark this incarnation's session over (clean shutdown); False if it was already replaced."""
    s = t.broker_sessions.c
    with store.write() as conn:
        updated = conn.execute(
            sa.update(t.broker_sessions)
            .where(
                s.broker_id == me.broker_id,
                s.incarnation == me.incarnation,
                s.epoch == me.epoch,
            )
            .values(heartbeat_ms=0)
        )
        return updated.rowcount == 1


def read_sessions(store: MetadataStore) -> tuple[int, list[SessionRow]]:
    """Every broker's session row with its report (when made by the same incarnation's epoch),
    and the database's clock read in the same statement."""
    with store.read() as conn:
        rows = conn.execute(
            sa.select(t.broker_sessions, store.now.label("now_ms")).order_by(
                t.broker_sessions.c.broker_id
            )
        ).all()
        now = int(rows[0].now_ms) if rows else store.now_ms(conn)
        reports = {
            (int(r.broker_id), int(r.epoch)): frozenset(
                BrokerId(b) for b in orjson.loads(r.unreachable)
            )
            for r in conn.execute(sa.select(t.peer_reports))
        }
    return now, [
        SessionRow(
            broker_id=BrokerId(r.broker_id),
            incarnation=str(r.incarnation),
            epoch=BrokerEpoch(r.epoch),
            url=str(r.url),
            rack=r.rack,
            heartbeat_ms=int(r.heartbeat_ms),
            applied_change=ChangeOffset(r.applied_change),
            unreachable=reports.get((int(r.broker_id), int(r.epoch)), frozenset()),
        )
        for r in rows
    ]


async def register_waiting(
    store: MetadataStore,
    broker_id: int,
    url: str,
    rack: str | None,
    session_timeout_ms: int,
    wait_ms: int,
) -> Registration:
    """:func:`register`, retried on ``BrokerIdInUseError`` for up to ``wait_ms``.

    Waiting one session timeout (plus a heartbeat) lets a restarted broker take its id back from
    its own dead predecessor; a live holder keeps heartbeating, so it is still refused.
    """
    incarnation = str(uuid.uuid4())
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        try:
            return await store.call(
                register, store, broker_id, url, rack, session_timeout_ms, incarnation
            )
        except BrokerIdInUseError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
