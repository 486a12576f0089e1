"""A broker whose metadata image falls behind the change log stops acting as a leader until it
catches up (``BROKER_METADATA_MAX_LAG_MS``).

A broker that cannot apply the change log but still heartbeats -- its follower failing on
every poll while its session is fine -- is never fenced, so nothing else would take its
leaderships away: it must not go on serving them from a view the cluster may have moved past.
Here the leader connects to PostgreSQL as a role of its own, and the test takes that role's
right to read the ``changes`` table away: its polls fail, its heartbeats (which read the log's
end) do not.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from headwater.records.batch import encode_batch
from tests.e2e.replication.cluster import (
    BATCHES,
    Cluster,
    create_topic,
    wait_all_active,
    wait_for,
)
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("postgres")]

LAG_MS = 1000


def test_a_broker_whose_image_lags_the_log_stops_leading_until_it_catches_up(
    tmp_path: Path, postgres_url: str
) -> None:
    cluster = Cluster(tmp_path, postgres_url)
    engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    role = unique("hw_victim").replace("-", "_")
    topic = unique("lag")
    victim = 2
    try:
        cluster.start(0)  # creates the tables, as postgres
        with engine.connect() as conn:
            conn.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
            conn.execute(sa.text(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"))
        own = postgres_url.replace("postgres@", f"{role}@")
        cluster.start(1)
        cluster.start(victim, BROKER_METADATA_URL=own, BROKER_METADATA_MAX_LAG_MS=str(LAG_MS))
        wait_all_active(cluster)
        create_topic(cluster, topic, replica_assignment=[[victim, 0, 1]])
        url = f"{cluster.url(victim)}/topics/{topic}/partitions/0/batches"
        body = encode_batch([(None, b"before", [])])

        def produce() -> httpx.Response:
            return httpx.post(url, content=body, headers=BATCHES, timeout=10)

        assert produce().status_code == 200

        with engine.connect() as conn:
            conn.execute(sa.text(f"REVOKE SELECT ON changes FROM {role}"))
        # The log moves on (a config change through another broker); the victim cannot read it.
        altered = httpx.patch(
            f"{cluster.url(0)}/topics/{topic}/configs",
            json={"set": {"retention.ms": "3600000"}},
            timeout=30,
        )
        assert altered.status_code == 200, altered.text
        wait_for(
            lambda: produce().status_code == 503, 10 * LAG_MS / 1000, "the victim to stop leading"
        )
        refused = produce()
        assert refused.json()["error_code"] == 50302
        assert "behind the cluster's change log" in refused.json()["message"]
        ready = httpx.get(f"{cluster.url(victim)}/readyz", timeout=5)
        assert ready.status_code == 503
        assert ready.json()["metadata_lag_ms"] > LAG_MS
        # Still the leader in the metadata: it heartbeats, so nobody fenced it.
        described = httpx.get(f"{cluster.url(0)}/topics/{topic}", timeout=5).json()
        assert described["partitions"][0]["leader"] == victim

        with engine.connect() as conn:
            conn.execute(sa.text(f"GRANT SELECT ON changes TO {role}"))
        wait_for(lambda: produce().status_code == 200, 20, "the victim to lead again")
        assert httpx.get(f"{cluster.url(victim)}/readyz", timeout=5).status_code == 200
        time.sleep(0.1)
    finally:
        cluster.stop_all()
        with engine.connect() as conn:
            conn.execute(sa.text(f"DROP OWNED BY {role}"))
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {role}"))
        engine.dispose()
