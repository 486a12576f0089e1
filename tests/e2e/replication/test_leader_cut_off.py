"""The leader cut off from its followers and from the metadata store under replicated acks=all
load (RF=3, min.insync.replicas=2), then healed.

Every broker advertises a severable TCP proxy (``tests/e2e/replication/proxy.py``) in front of
its port and reaches PostgreSQL through a proxy of its own; the test severs the leader's two:
followers can no longer fetch from it and it can no longer heartbeat. It must acknowledge
nothing once cut off (its acks=all waits fail because its followers stop fetching), the
controller fences it and elects a new leader from the in-sync followers, and after healing it
rejoins with nothing acknowledged lost. A second producer keeps sending to the cut-off leader
directly (not through a proxy) to see that it acknowledges nothing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    PER_BATCH,
    Cluster,
    Producer,
    Reader,
    acknowledge_more,
    check_after_healing,
    create_topic,
    replicas_identical,
    wait_all_active,
    wait_for,
)
from tests.e2e.replication.proxy import Proxy
from tests.support import unique

pytestmark = pytest.mark.e2e

GRACE_S = 0.5  # an answer already on its way when the links were cut


def test_a_leader_cut_off_acknowledges_nothing_and_loses_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    assert ":5432/" in postgres_url
    cluster = Cluster(tmp_path, postgres_url)
    inbound = {b: Proxy(cluster.ports[b]) for b in range(3)}
    metadata = {b: Proxy(5432) for b in range(3)}
    topic = unique("cutoff")
    try:
        for b in range(3):
            cluster.start(
                b,
                BROKER_ADVERTISED_URL=f"http://127.0.0.1:{inbound[b].port}",
                BROKER_METADATA_URL=postgres_url.replace(":5432/", f":{metadata[b].port}/"),
            )
        wait_all_active(cluster)
        create_topic(cluster, topic)
        new_producer = f"{cluster.url(0)}/producers"
        load = Producer(cluster, topic, httpx.post(new_producer, json={}, timeout=10).json(),
                        timeout_s=2)  # fmt: skip
        load.start()
        reader = Reader(cluster, topic)
        reader.start()
        acknowledge_more(load, 30, 60, "acks before the cut")
        described = cluster.describe(topic)
        assert described is not None
        cut, old_epoch = described["leader"], described["leader_epoch"]
        assert isinstance(cut, int)
        assert isinstance(old_epoch, int)
        healed = threading.Event()
        stray = Producer(
            cluster,
            topic,
            httpx.post(new_producer, json={}, timeout=10).json(),
            timeout_s=2,
            route=lambda: cut if not healed.is_set() else cluster.leader(topic),
            prefix="stray-",
        )
        stray.start()
        wait_for(lambda: len(stray.acknowledged) >= 5 * PER_BATCH, 30, "the stray producer")

        cluster.cut.add(cut)
        inbound[cut].sever()
        metadata[cut].sever()
        cut_at = time.monotonic()
        wait_for(lambda: cluster.leader(topic) not in (-1, cut), 30, "a new leader")
        acknowledge_more(load, 30, 60, "acks by the new leader")
        assert not stray.done.is_set(), stray.errors
        stray_tried = sum(1 for t, b, _s, _l in stray.answers if b == cut and t > cut_at)
        assert stray_tried > 0  # the cut-off leader was asked while cut off

        inbound[cut].heal()
        metadata[cut].heal()
        healed_at = time.monotonic()
        cluster.cut.discard(cut)
        healed.set()
        acknowledge_more(load, 10, 60, "acks after healing")
        acknowledge_more(stray, 10, 60, "the stray producer's acks after healing")
        while_cut = [
            (round(t - cut_at, 2), status, last)
            for producer in (load, stray)
            for t, b, status, last in producer.answers
            if b == cut and status == 200 and cut_at + GRACE_S < t < healed_at
        ]
        assert while_cut == [], while_cut
        high_watermark = check_after_healing(cluster, topic, load, stray, reader=reader)
    finally:
        cluster.stop_all()
        for proxy in (*inbound.values(), *metadata.values()):
            proxy.close()
    replicas_identical(tmp_path, topic, high_watermark)
