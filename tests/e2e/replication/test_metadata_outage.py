"""The metadata database (a private PostgreSQL) stopped for 30 s under replicated acks=all load
(RF=3, min.insync.replicas=2), then started again: writes may stall, nothing acknowledged is lost.

``HW_METADATA_OUTAGE_S`` shortens (or lengthens) the outage; the default is the issue's 30 s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.cluster.test_metadata_outage import PrivatePostgres
from tests.e2e.replication.cluster import (
    Cluster,
    Producer,
    Reader,
    acknowledge_more,
    check_after_healing,
    create_topic,
    replicas_identical,
    start_three,
)
from tests.support import unique

pytestmark = pytest.mark.e2e

OUTAGE_S = float(os.environ.get("HW_METADATA_OUTAGE_S", "30"))


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def test_a_metadata_outage_under_replicated_load_loses_no_acknowledged_record(
    tmp_path: Path, private_postgres: PrivatePostgres
) -> None:
    cluster = Cluster(tmp_path, private_postgres.url)
    topic = unique("mdout")
    try:
        start_three(cluster)
        create_topic(cluster, topic)
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer)
        load.start()
        reader = Reader(cluster, topic)
        reader.start()
        acknowledge_more(load, 30, 60, "acks before the outage")
        private_postgres.stop()
        try:
            time.sleep(OUTAGE_S)
            assert not load.done.is_set(), load.errors
        finally:
            private_postgres.start()
        acknowledge_more(load, 30, 60, "acks after the outage")
        high_watermark = check_after_healing(cluster, topic, load, reader=reader)
    finally:
        cluster.stop_all()
    replicas_identical(tmp_path, topic, high_watermark)
