"""The coordinator's consumer lag gauges on /metrics (in-process app, real Redis) against a
real broker process: exact per-partition and total lag, removal of a deleted group's series,
and last values kept (one warning) while no broker answers."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from headwater import AdminClient, Producer
from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from tests.support import ServiceProcess, free_port, unique


@pytest.fixture
def api(broker: ServiceProcess, redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    settings = CoordinatorSettings(
        redis_url=redis_url,
        key_prefix=redis_prefix,
        brokers=broker.url,
        lag_metrics_interval_ms=100,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def produce(broker: ServiceProcess, topic: str, partitions: int, records: int) -> None:
    with Producer({"bootstrap.servers": broker.url}) as producer:
        for i in range(records):
            producer.produce(topic, b"v%d" % i, partition=i % partitions)
        producer.flush(30)


def make_topic(broker: ServiceProcess, partitions: int, records: int) -> str:
    name = unique("lagm")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(name, partitions)
    produce(broker, name, partitions, records)
    return name


def commit(api: TestClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    body = {"offsets": [{"topic": topic, "partition": p, "offset": o} for p, o in offsets.items()]}
    response = api.post(f"/groups/{group}/offsets", json=body)
    assert response.status_code == 204, response.text


def lag_series(api: TestClient, group: str) -> tuple[dict[tuple[str, str], float], float | None]:
    """The group's per-partition lag samples and its total, as scraped from /metrics."""
    response = api.get("/metrics")
    assert response.status_code == 200
    partitions: dict[tuple[str, str], float] = {}
    total: float | None = None
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.labels.get("group") != group:
                continue
            if sample.name == "headwater_coordinator_consumer_lag":
                partitions[(sample.labels["topic"], sample.labels["partition"])] = sample.value
            elif sample.name == "headwater_coordinator_group_lag":
                total = sample.value
    return partitions, total


def wait_for_lag(
    api: TestClient, group: str, expected: tuple[dict[tuple[str, str], float], float | None]
) -> None:
    deadline = time.monotonic() + 10
    seen = lag_series(api, group)
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = lag_series(api, group)
    assert seen == expected


def test_lag_per_partition_and_total_then_gone_after_delete(
    api: TestClient, broker: ServiceProcess
) -> None:
    topic, group = make_topic(broker, 3, records=12), unique("g")  # 4 records per partition
    commit(api, group, topic, {0: 1, 1: 4})  # partition 2 uncommitted: lag from the beginning
    wait_for_lag(api, group, ({(topic, "0"): 3.0, (topic, "1"): 0.0, (topic, "2"): 4.0}, 7.0))

    commit(api, group, topic, {0: 4, 2: 2})
    wait_for_lag(api, group, ({(topic, "0"): 0.0, (topic, "1"): 0.0, (topic, "2"): 2.0}, 2.0))

    assert api.delete(f"/groups/{group}").status_code == 204
    wait_for_lag(api, group, ({}, None))


def test_failing_broker_keeps_last_values_and_warns_once(
    api: TestClient, broker: ServiceProcess, caplog: pytest.LogCaptureFixture
) -> None:
    topic, group = make_topic(broker, 2, records=6), unique("g")  # 3 records per partition
    commit(api, group, topic, {0: 1})
    last = ({(topic, "0"): 2.0, (topic, "1"): 3.0}, 5.0)
    wait_for_lag(api, group, last)

    metadata = api.app.state.coordinator.metadata  # type: ignore[attr-defined]
    working = metadata.brokers
    caplog.set_level(logging.INFO, logger="headwater.coordinator")
    metadata.brokers = [f"http://127.0.0.1:{free_port()}"]  # nothing listens there
    produce(broker, topic, 2, 4)  # the log ends move while the coordinator cannot see them
    time.sleep(metadata.ttl_s + 1.0)  # the cached end offsets expire; ~10 refreshes fail
    assert lag_series(api, group) == last
    warnings = [r for r in caplog.records if "keep their last values" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert group in warnings[0].getMessage()

    metadata.brokers = working
    wait_for_lag(api, group, ({(topic, "0"): 4.0, (topic, "1"): 5.0}, 9.0))
    assert any("refresh again" in r.getMessage() for r in caplog.records)
    assert api.delete(f"/groups/{group}").status_code == 204
