"""A broker paused (SIGSTOP) inside one of its metadata transactions, long enough for PostgreSQL
to end the session, catches up after it resumes.

The broker sets ``idle_in_transaction_session_timeout`` to its lease (2 s): a session left idle
inside a transaction is ended by the server, and on resume the broker's next statement fails
with SQLSTATE 25P03 (SQLAlchemy's ``InternalError``). The metadata follower and the heartbeat
loop must survive that: before, the follower task ended silently and the broker's image froze
for good (it stayed fenced and out of every in-sync set, still believing it led), and a dead
heartbeat loop left it fenced forever.

The pause is placed exactly: each broker reaches PostgreSQL through a proxy
(``tests/e2e/replication/proxy.py``) that stops the broker right after relaying the server's
answer to the transaction's first statement -- the follower's ``SELECT controller.last_change``,
the heartbeat's ``UPDATE broker_sessions`` -- and the test checks ``pg_stat_activity`` shows the
session idle in that very transaction (else it resumes the broker and tries again) before it
keeps the broker stopped for 4 s.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.e2e.replication.cluster import Cluster, create_topic, wait_all_active, wait_for
from tests.e2e.replication.proxy import Proxy
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("postgres")]

# The server's answer to the first statement of each transaction, as relayed to the broker,
# and that statement as pg_stat_activity shows it while the session is idle after it.
FIRST_ANSWER: dict[str, Callable[[bytes], bool]] = {
    # MetadataStore.read_changes: the log's end (a row description naming it), then the rows.
    "follower": lambda data: b"last_change" in data,
    # session.heartbeat: the session row updated, then the log's end.
    "heartbeat": lambda data: b"UPDATE 1" in data,
}
FAILED_LINE = {"follower": "metadata poll failed", "heartbeat": "heartbeat failed"}
QUERY_LIKE = {
    "follower": "SELECT controller.last_change%WHERE%",
    "heartbeat": "UPDATE broker_sessions%",
}


def _idle_in(engine: sa.Engine, broker: int, query_like: str) -> bool:
    with engine.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app "
                "AND state = 'idle in transaction' AND query LIKE :q"
            ),
            {"app": f"headwater-broker-{broker}", "q": query_like},
        ).scalar_one()
    return bool(found)


def _applied(engine: sa.Engine) -> tuple[int, dict[int, int]]:
    with engine.connect() as conn:
        last = conn.execute(sa.text("SELECT last_change FROM controller")).scalar_one()
        rows = conn.execute(sa.text("SELECT broker_id, applied_change FROM broker_sessions"))
        return int(last), {int(b): int(a) for b, a in rows}


@pytest.mark.parametrize("transaction", ["follower", "heartbeat"])
def test_a_broker_paused_inside_a_metadata_transaction_catches_up(
    tmp_path: Path, postgres_url: str, transaction: str
) -> None:
    cluster = Cluster(tmp_path, postgres_url)
    proxies = {b: Proxy(5432) for b in range(3)}
    engine = sa.create_engine(postgres_url)
    topic = unique("pause")
    try:
        for b in range(3):
            cluster.start(
                b, BROKER_METADATA_URL=postgres_url.replace(":5432/", f":{proxies[b].port}/")
            )
        wait_all_active(cluster)
        create_topic(cluster, topic)
        victim = cluster.leader(topic)
        process = cluster.processes[victim].process
        assert process is not None
        proxy = proxies[victim]
        for _attempt in range(20):  # bounded: the first try nearly always places it
            proxy.pause_after(
                FIRST_ANSWER[transaction], lambda: os.kill(process.pid, signal.SIGSTOP)
            )
            assert proxy.fired.wait(10), f"the broker sent no {transaction} transaction"
            if _idle_in(engine, victim, QUERY_LIKE[transaction]):
                break
            process.send_signal(signal.SIGCONT)  # stopped a moment too late: again
            time.sleep(0.05)
        else:
            raise AssertionError(f"never stopped inside the {transaction}'s transaction")
        stopped_at = time.monotonic()
        # The server ends the idle transaction's session after the broker's 2 s stall timeout.
        wait_for(
            lambda: not _idle_in(engine, victim, QUERY_LIKE[transaction]), 10, "the session ended"
        )
        time.sleep(max(0.0, 4.0 - (time.monotonic() - stopped_at)))
        process.send_signal(signal.SIGCONT)

        # The log moves on while the broker recovers: a topic created through another broker.
        other = next(b for b in range(3) if b != victim)
        later = unique("after-pause")
        created = httpx.post(
            f"{cluster.url(other)}/topics", json={"name": later, "partitions": 1}, timeout=30
        )
        assert created.status_code == 201, created.text

        def caught_up() -> bool:
            last, applied = _applied(engine)
            return all(applied.get(b) == last for b in range(3))

        wait_for(caught_up, 20, "every broker's image at the end of the change log")
        wait_all_active(cluster)
        # Active in its own image too (it learns of its unfencing one poll after the others).
        wait_for(
            lambda: httpx.get(f"{cluster.url(victim)}/readyz", timeout=5).status_code == 200,
            10,
            "the resumed broker ready",
        )
        assert httpx.get(f"{cluster.url(victim)}/readyz", timeout=5).json()["failed_tasks"] == {}
        known = httpx.get(f"{cluster.url(victim)}/topics/{later}", timeout=5)
        assert known.status_code == 200, known.text
        # The resumed broker's statement failed: the server had ended the session (told as
        # 25P03, or as a closed connection when the reset overtakes the server's last message;
        # tests/integration/cluster/test_store.py provokes 25P03 itself).
        log = (tmp_path / f"broker-{victim}.log").read_text(errors="replace")
        assert FAILED_LINE[transaction] in log, log[-3000:]
    finally:
        for proc in cluster.processes.values():
            if proc.process is not None and proc.running():
                proc.process.send_signal(signal.SIGCONT)
        cluster.stop_all()
        for proxy in proxies.values():
            proxy.close()
        engine.dispose()
