"""Links cut between brokers that all still reach the metadata store, under acks=all load
(RF=3, min.insync.replicas=2): writes stall only until the broken link is detected, not for
``replica.lag.time.max.ms`` (30 s here, so that only the fast rules can explain the recovery).

- **A follower cut off from its leader** (the leader's proxy cuts the follower's fetches, told by
  their replica id): the leader sees that follower's fetches stop while it is behind and drops it
  from the ISR after twice ``BROKER_REPLICA_FETCH_TIMEOUT_MS``; writes go on with two replicas.
- **A leader cut off from its followers** (nobody reaches its port; it still heartbeats and
  reaches the controller): both followers report it unreachable with their heartbeats after one
  fetch timeout, and the controller moves the leadership to one of them, the old leader out of
  the ISR; writes go on at the new leader.

After healing, every acknowledged record is in the partition once, in order, the replicas are
identical, and each test prints the longest wait between two acknowledged writes around the cut
(the unavailability docs/cluster.md reports).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import (
    Cluster,
    Producer,
    acknowledge_more,
    all_in_sync,
    check_after_healing,
    create_topic,
    replicas_identical,
    wait_all_active,
    wait_for,
)
from tests.e2e.replication.proxy import Proxy
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("postgres")]

LAG_MS = 30_000  # far beyond the test: only the fast rules shrink the ISR or move the leader


def start(cluster: Cluster, inbound: dict[int, Proxy]) -> None:
    for b in range(3):
        cluster.start(
            b,
            BROKER_ADVERTISED_URL=f"http://127.0.0.1:{inbound[b].port}",
            BROKER_REPLICA_LAG_TIME_MAX_MS=str(LAG_MS),
        )
    wait_all_active(cluster)


def longest_wait(load: Producer, since: float) -> float:
    """The longest time between two acknowledged writes, from the last one before ``since``."""
    acked = [t for t, _b, status, _last in load.answers if status == 200]
    before = [t for t in acked if t <= since]
    times = ([before[-1]] if before else []) + [t for t in acked if t > since]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def isr(cluster: Cluster, topic: str) -> list[int]:
    described = cluster.describe(topic)
    members = [] if described is None else described["isr"]
    assert isinstance(members, list)
    return sorted(members)


def test_a_follower_cut_off_from_its_leader_leaves_the_isr_within_seconds(
    tmp_path: Path, postgres_url: str
) -> None:
    cluster = Cluster(tmp_path, postgres_url)
    inbound = {b: Proxy(cluster.ports[b]) for b in range(3)}
    topic = unique("followercut")
    try:
        start(cluster, inbound)
        create_topic(cluster, topic, replica_assignment=[[0, 1, 2]])
        producer = httpx.post(f"{cluster.url(0)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer, timeout_s=2)
        load.start()
        acknowledge_more(load, 20, 60, "acks before the cut")
        inbound[0].block(lambda data: b'"replica_id":2,' in data)
        cut_at = time.monotonic()
        wait_for(lambda: isr(cluster, topic) == [0, 1], 15, "broker 2 out of the ISR")
        acknowledge_more(load, 20, 60, "acks with two in-sync replicas")
        waited = longest_wait(load, cut_at)
        assert cluster.leader(topic) == 0
        inbound[0].block(None)
        wait_for(lambda: all_in_sync(cluster, topic), 60, "broker 2 back in the ISR")
        high_watermark = check_after_healing(cluster, topic, load)
        print(f"\nfollower cut off: longest wait between acknowledged writes {waited:.2f} s")
    finally:
        cluster.stop_all()
        for proxy in inbound.values():
            proxy.close()
    replicas_identical(tmp_path, topic, high_watermark)


def test_a_leader_cut_off_from_its_followers_is_replaced_within_seconds(
    tmp_path: Path, postgres_url: str
) -> None:
    cluster = Cluster(tmp_path, postgres_url)
    inbound = {b: Proxy(cluster.ports[b]) for b in range(3)}
    topic = unique("leadercut")
    try:
        start(cluster, inbound)
        create_topic(cluster, topic, replica_assignment=[[0, 1, 2]])
        producer = httpx.post(f"{cluster.url(1)}/producers", json={}, timeout=10).json()
        load = Producer(cluster, topic, producer, timeout_s=2)
        load.start()
        acknowledge_more(load, 20, 60, "acks before the cut")
        inbound[0].sever()  # followers cannot fetch; broker 0 still heartbeats
        cut_at = time.monotonic()
        wait_for(lambda: cluster.leader(topic) in (1, 2), 15, "a new leader")
        assert 0 not in isr(cluster, topic)
        acknowledge_more(load, 20, 60, "acks at the new leader")
        waited = longest_wait(load, cut_at)
        inbound[0].heal()
        wait_for(lambda: all_in_sync(cluster, topic), 60, "broker 0 back in the ISR")
        high_watermark = check_after_healing(cluster, topic, load)
        print(f"\nleader cut off: longest wait between acknowledged writes {waited:.2f} s")
    finally:
        cluster.stop_all()
        for proxy in inbound.values():
            proxy.close()
    replicas_identical(tmp_path, topic, high_watermark)
