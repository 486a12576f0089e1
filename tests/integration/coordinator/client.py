"""The coordinator's HTTP API as the integration tests call it: topics on the test broker,
members that join and heartbeat, the partitions an answer assigns."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from headwater import AdminClient, Producer
from tests.support import ServiceProcess, unique


def make_topic(broker: ServiceProcess, partitions: int, records: int = 0) -> str:
    name = unique("coord")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(name, partitions)
    if records:
        with Producer({"bootstrap.servers": broker.url}) as producer:
            for i in range(records):
                producer.produce(name, b"v%d" % i, partition=i % partitions)
            producer.flush(30)
    return name


def join(api: TestClient, group: str, topics: list[str], **extra: Any) -> dict[str, Any]:
    response = api.post(
        f"/groups/{group}/heartbeat", json={"member_epoch": 0, "topics": topics, **extra}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def beat(api: TestClient, group: str, member: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One heartbeat. A heartbeat that leaves ``session_timeout_ms`` out takes the coordinator's
    default from then on: pass the member's own in ``fields`` to keep it."""
    response = api.post(
        f"/groups/{group}/heartbeat",
        json={
            "member_id": member["member_id"],
            "member_epoch": member["member_epoch"],
            "owned": member["assignment"],
            **fields,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def partitions_of(member: dict[str, Any]) -> set[tuple[str, int]]:
    return {(a["topic"], p) for a in member["assignment"] for p in a["partitions"]}
