"""A Kafka wire-protocol client pointed at a broker's HTTP port: one clear log line, not dozens."""

from __future__ import annotations

import re
import time
from pathlib import Path

import confluent_kafka
import httpx
import pytest

from tests.support import ServiceProcess, free_port

pytestmark = pytest.mark.e2e


def test_a_kafka_producer_gets_one_log_line(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "broker.log"
    env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path / "data"),
        "BROKER_LOG_LEVEL": "debug",  # the repeated connections show at debug level
        "HEADWATER_LOG_FORMAT": "json",
    }
    with ServiceProcess("headwater_broker", port, env, log_path=log) as broker:
        # What the user did: confluent-kafka's Producer aimed at the broker's port.
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0}
        )
        producer.produce("orders", b"x")
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            producer.poll(0.1)
        assert len(producer) == 1  # nothing was delivered: the broker is no Kafka broker
        del producer
        assert httpx.get(f"{broker.url}/healthz").status_code == 200  # still serving HTTP
    lines = log.read_text().splitlines()
    warnings = [line for line in lines if '"level":"WARNING"' in line]
    assert len(warnings) == 1, "\n".join(warnings)
    # librdkafka opens with ApiVersions (its version depends on the librdkafka release).
    assert re.search(
        rf"closed a Kafka connection from 127\.0\.0\.1 to port {port} \(ApiVersions v\d+ "
        r"request, client id 'rdkafka'\)\. Headwater speaks HTTP only, not the Kafka protocol",
        warnings[0],
    ), warnings[0]
    assert not [line for line in lines if "Invalid HTTP request" in line]
    repeated = [line for line in lines if "closed another Kafka connection" in line]
    assert len(repeated) >= 3  # the client kept reconnecting, quietly
