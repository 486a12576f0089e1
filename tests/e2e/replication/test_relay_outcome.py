"""A REST produce relayed to the leader whose answer is lost: 502 50201 ("may have been
appended"), never the retriable-looking 503 50302; retried with the same Idempotency-Key it is
answered with the stored offset, and the record is in the partition once.

Broker 0 receives the produce and relays it to the leader, broker 1, through a proxy in front of
broker 1; the proxy stops broker 1 (SIGSTOP) right after relaying the request to it, so the relay
times out; broker 1 resumes, appends and replicates the record, and answers a relay that is
gone.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.e2e.replication.cluster import Cluster, create_topic, read_values, wait_all_active
from tests.e2e.replication.proxy import Proxy
from tests.support import unique

pytestmark = [pytest.mark.e2e, pytest.mark.needs("postgres")]

KAFKA_JSON = "application/vnd.kafka.json.v2+json"


def test_a_relay_whose_answer_is_lost_says_so_and_a_keyed_retry_stores_once(
    tmp_path: Path, postgres_url: str
) -> None:
    cluster = Cluster(tmp_path, postgres_url)
    inbound = {b: Proxy(cluster.ports[b]) for b in range(3)}
    topic = unique("relay")
    try:
        for b in range(3):
            cluster.start(
                b,
                BROKER_ADVERTISED_URL=f"http://127.0.0.1:{inbound[b].port}",
                BROKER_FORWARD_TIMEOUT_MS="1500",
            )
        wait_all_active(cluster)
        create_topic(cluster, topic, replica_assignment=[[1, 0, 2]])
        leader = cluster.processes[1].process
        assert leader is not None
        inbound[1].pause_after(
            lambda data: b"POST /topics/" in data,
            lambda: os.kill(leader.pid, signal.SIGSTOP),
            upward=True,
        )
        headers = {"content-type": KAFKA_JSON, "Idempotency-Key": "order-7"}
        body = {"records": [{"value": {"order": 7}}]}
        url = f"{cluster.url(0)}/topics/{topic}"
        lost = httpx.post(url, json=body, headers=headers, timeout=30)
        assert inbound[1].fired.is_set()
        leader.send_signal(signal.SIGCONT)
        assert lost.status_code == 502, lost.text
        assert lost.json()["error_code"] == 50201
        assert "may have been appended" in lost.json()["message"]

        retried = httpx.post(url, json=body, headers=headers, timeout=30)
        assert retried.status_code == 200, retried.text
        (offset,) = retried.json()["offsets"]
        assert offset["offset"] == 0
        # Read from whoever leads now (the resumed broker may be catching up on its metadata,
        # or have handed the partition on): 421s followed, 503s asked again.
        values, end = read_values(cluster, topic, 1)
        assert values == ['{"order":7}']  # the first attempt's append, once
        assert end == 1
    finally:
        for proc in cluster.processes.values():
            if proc.process is not None and proc.running():
                proc.process.send_signal(signal.SIGCONT)
        cluster.stop_all()
        for proxy in inbound.values():
            proxy.close()
