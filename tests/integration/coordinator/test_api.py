"""The coordinator's HTTP API (in-process app, real Redis) against a real broker process:
join and assignment, error codes that change nothing, commits, offsets, reset, lag, admin."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headwater import AdminClient, Producer
from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from tests.support import ServiceProcess, unique


@pytest.fixture
def api(broker: ServiceProcess, redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    settings = CoordinatorSettings(
        redis_url=redis_url,
        key_prefix=redis_prefix,
        brokers=broker.url,
        heartbeat_interval_ms=500,
        session_timeout_ms=1000,
        sweep_interval_ms=100,
    )
    with TestClient(create_app(settings)) as client:
        yield client


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


def beat(api: TestClient, group: str, member: dict[str, Any]) -> dict[str, Any]:
    response = api.post(
        f"/groups/{group}/heartbeat",
        json={
            "member_id": member["member_id"],
            "member_epoch": member["member_epoch"],
            "owned": member["assignment"],
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def partitions_of(member: dict[str, Any]) -> set[tuple[str, int]]:
    return {(a["topic"], p) for a in member["assignment"] for p in a["partitions"]}


def test_three_members_share_twelve_partitions(api: TestClient, broker: ServiceProcess) -> None:
    topic, group = make_topic(broker, 12), unique("g")
    members = [join(api, group, [topic]) for _ in range(3)]
    for _ in range(4):
        members = [beat(api, group, m) for m in members]
    owned = [partitions_of(m) for m in members]
    assert [len(o) for o in owned] == [4, 4, 4]
    assert set().union(*owned) == {(topic, p) for p in range(12)}
    described = api.get(f"/groups/{group}").json()
    assert described["state"] == "Stable"
    assert described["epoch"] == 3
    assert described["topics"] == {topic: 12}
    assert {m["member_id"] for m in described["members"]} == {m["member_id"] for m in members}
    assert members[0]["heartbeat_interval_ms"] == 500


def test_new_partitions_are_assigned(api: TestClient, broker: ServiceProcess) -> None:
    topic, group = make_topic(broker, 2), unique("g")
    member = join(api, group, [topic], session_timeout_ms=10_000)
    assert partitions_of(member) == {(topic, 0), (topic, 1)}
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_partitions(topic, 3)
    import time

    time.sleep(2.1)  # the coordinator caches topic metadata for 2 s, then refreshes it
    deadline = time.monotonic() + 5  # in the background: a heartbeat or two later
    while len(partitions_of(member)) < 3 and time.monotonic() < deadline:
        member = beat(api, group, member)
        time.sleep(0.05)
    assert partitions_of(member) == {(topic, 0), (topic, 1), (topic, 2)}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"member_epoch": 0, "topics": ["t"], "session_timeout_ms": 50}, 422, 42202),
        ({"member_epoch": 0, "topics": ["t"], "rebalance_timeout_ms": 10**9}, 422, 42202),
        ({"member_epoch": 0, "topics": ["t"], "assignor": "roundrobin"}, 422, 42203),
        ({"member_epoch": 0}, 422, 42200),
        ({"member_epoch": 3}, 422, 42200),
        ({"member_id": "nobody", "member_epoch": 3}, 404, 40402),
        ({"member_epoch": "x"}, 422, 42200),
    ],
)
def test_bad_heartbeats_get_their_codes_and_change_nothing(
    api: TestClient, body: dict[str, Any], status: int, code: int
) -> None:
    group = unique("g")
    response = api.post(f"/groups/{group}/heartbeat", json=body)
    assert (response.status_code, response.json()["error_code"]) == (status, code)
    assert api.get(f"/groups/{group}").status_code == 404
    assert all(g["group_id"] != group for g in api.get("/groups").json())


def test_malformed_json_and_bad_group_id(api: TestClient) -> None:
    response = api.post(
        "/groups/g/heartbeat", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert (response.status_code, response.json()["error_code"]) == (400, 40002)
    response = api.post("/groups/bad%20id/heartbeat", json={"member_epoch": 0, "topics": ["t"]})
    assert (response.status_code, response.json()["error_code"]) == (422, 42204)


def test_wrong_epoch_is_fenced(api: TestClient, broker: ServiceProcess) -> None:
    topic, group = make_topic(broker, 1), unique("g")
    member = join(api, group, [topic])
    before = api.get(f"/groups/{group}").json()
    response = api.post(
        f"/groups/{group}/heartbeat",
        json={"member_id": member["member_id"], "member_epoch": member["member_epoch"] + 7},
    )
    assert (response.status_code, response.json()["error_code"]) == (409, 40901)
    after = api.get(f"/groups/{group}").json()
    for m in before["members"] + after["members"]:
        m.pop("last_heartbeat_ms")
    assert after == before


def test_commit_rules(api: TestClient, broker: ServiceProcess) -> None:
    topic, group = make_topic(broker, 2, records=10), unique("g")
    a = join(api, group, [topic])
    b = join(api, group, [topic])
    for _ in range(3):
        a, b = beat(api, group, a), beat(api, group, b)
    (mine,) = [p for _, p in partitions_of(a)]
    (theirs,) = [p for _, p in partitions_of(b)]

    def commit(member: dict[str, Any] | None, partition: int, offset: int) -> Any:
        body: dict[str, Any] = {
            "offsets": [{"topic": topic, "partition": partition, "offset": offset}]
        }
        if member:
            body |= {"member_id": member["member_id"], "member_epoch": member["member_epoch"]}
        return api.post(f"/groups/{group}/offsets", json=body)

    assert commit(a, mine, 3).status_code == 204
    cases = [
        (commit(a, theirs, 3), 409, 40905),
        (commit(a, mine, -1), 422, 42201),
        (commit(a, mine, 6), 422, 42201),  # each partition holds 5 records
        (commit(a, 7, 1), 404, 40403),
        (commit(None, mine, 1), 409, 40904),
        (commit({"member_id": "zombie", "member_epoch": 1}, mine, 1), 404, 40402),
        (commit({**a, "member_epoch": 0}, mine, 1), 409, 40902),  # older than it ever knew
    ]
    for response, status, code in cases:
        assert (response.status_code, response.json()["error_code"]) == (status, code)
    offsets = api.get(f"/groups/{group}/offsets").json()["offsets"]
    assert [(o["topic"], o["partition"], o["offset"]) for o in offsets] == [(topic, mine, 3)]
    assert commit(a, mine, 5).status_code == 204  # == log end is fine: nothing left to read


def test_lag_reset_and_delete(api: TestClient, broker: ServiceProcess) -> None:
    topic, group = make_topic(broker, 2, records=10), unique("g")
    member = join(api, group, [topic])
    response = api.post(
        f"/groups/{group}/offsets",
        json={
            "member_id": member["member_id"],
            "member_epoch": member["member_epoch"],
            "offsets": [{"topic": topic, "partition": 0, "offset": 2}],
        },
    )
    assert response.status_code == 204
    lag = api.get(f"/groups/{group}/lag").json()
    assert lag["total_lag"] == 3 + 5
    assert [
        (p["partition"], p["committed_offset"], p["end_offset"], p["lag"])
        for p in lag["partitions"]
    ] == [
        (0, 2, 5, 3),
        (1, None, 5, 5),
    ]
    response = api.post(
        f"/groups/{group}/offsets/reset", json={"strategy": "latest", "topics": [topic]}
    )
    assert (response.status_code, response.json()["error_code"]) == (409, 40904)
    assert api.delete(f"/groups/{group}").json()["error_code"] == 40904
    leave = api.post(
        f"/groups/{group}/heartbeat",
        json={"member_id": member["member_id"], "member_epoch": -1},
    )
    assert leave.json()["member_epoch"] == -1
    assert api.get(f"/groups/{group}").json()["state"] == "Empty"

    def reset(body: dict[str, Any]) -> list[tuple[int, int]]:
        response = api.post(f"/groups/{group}/offsets/reset", json=body)
        assert response.status_code == 200, response.text
        return [(o["partition"], o["offset"]) for o in response.json()["offsets"]]

    assert reset({"strategy": "latest", "topics": [topic]}) == [(0, 5), (1, 5)]
    assert reset({"strategy": "earliest", "topics": [topic]}) == [(0, 0), (1, 0)]
    assert reset({"strategy": "timestamp", "topics": [topic], "timestamp": 2**50}) == [
        (0, 5),
        (1, 5),
    ]
    assert reset({"strategy": "timestamp", "topics": [topic], "timestamp": 0}) == [(0, 0), (1, 0)]
    explicit = {"strategy": "explicit", "offsets": [{"topic": topic, "partition": 1, "offset": 4}]}
    assert reset(explicit) == [(0, 0), (1, 4)]
    too_far = {"strategy": "explicit", "offsets": [{"topic": topic, "partition": 1, "offset": 6}]}
    response = api.post(f"/groups/{group}/offsets/reset", json=too_far)
    assert (response.status_code, response.json()["error_code"]) == (422, 42201)
    response = api.post(f"/groups/{group}/offsets/reset", json={"strategy": "latest"})
    assert (response.status_code, response.json()["error_code"]) == (422, 42205)
    assert group in [g["group_id"] for g in api.get("/groups").json()]
    assert api.delete(f"/groups/{group}").status_code == 204
    assert api.get(f"/groups/{group}").status_code == 404
    assert api.get(f"/groups/{group}/offsets").json()["error_code"] == 40401
    assert group not in [g["group_id"] for g in api.get("/groups").json()]


def test_expired_member_is_removed_by_the_sweep(api: TestClient, broker: ServiceProcess) -> None:
    import time

    topic, group = make_topic(broker, 4), unique("g")
    dead = join(api, group, [topic], session_timeout_ms=300)
    live = join(api, group, [topic], session_timeout_ms=5000)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        live = beat(api, group, live)
        if len(partitions_of(live)) == 4:
            break
        time.sleep(0.1)
    assert partitions_of(live) == {(topic, p) for p in range(4)}
    members = api.get(f"/groups/{group}").json()["members"]
    assert [m["member_id"] for m in members] == [live["member_id"]]
    response = api.post(
        f"/groups/{group}/offsets",
        json={
            "member_id": dead["member_id"],
            "member_epoch": dead["member_epoch"],
            "offsets": [{"topic": topic, "partition": 0, "offset": 0}],
        },
    )
    assert response.json()["error_code"] == 40402


def test_openapi_documents_every_route(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert set(paths) >= {
        "/groups",
        "/groups/{group_id}",
        "/groups/{group_id}/heartbeat",
        "/groups/{group_id}/offsets",
        "/groups/{group_id}/offsets/reset",
        "/groups/{group_id}/lag",
    }


def test_a_parked_heartbeat_returns_as_soon_as_the_group_changes(
    api: TestClient, broker: ServiceProcess
) -> None:
    import threading
    import time

    topic, group = make_topic(broker, 4), unique("g")
    a = join(api, group, [topic], session_timeout_ms=20_000)
    a = beat(api, group, a)  # stable: owns all four
    answers: list[tuple[float, dict[str, Any]]] = []

    def parked() -> None:
        started = time.monotonic()
        response = api.post(
            f"/groups/{group}/heartbeat",
            json={
                "member_id": a["member_id"],
                "member_epoch": a["member_epoch"],
                "owned": a["assignment"],
                "wait_ms": 8_000,
                "session_timeout_ms": 20_000,
            },
        )
        answers.append((time.monotonic() - started, response.json()))

    waiter = threading.Thread(target=parked)
    waiter.start()
    time.sleep(0.5)
    join(api, group, [topic], session_timeout_ms=20_000)  # the change that wakes it
    waiter.join(timeout=10)
    ((elapsed, answer),) = answers
    assert 0.4 < elapsed < 3.0
    assert len(partitions_of(answer)) == 2  # told to give two partitions up, at once
    # Reporting the release is news (a new epoch): answered at once.
    answer = api.post(
        f"/groups/{group}/heartbeat",
        json={
            "member_id": a["member_id"],
            "member_epoch": answer["member_epoch"],
            "owned": answer["assignment"],
            "wait_ms": 5_000,
            "session_timeout_ms": 20_000,
        },
    ).json()
    assert answer["member_epoch"] == 2
    # Nothing new for a stable member: held for the whole wait.
    started = time.monotonic()
    quiet = api.post(
        f"/groups/{group}/heartbeat",
        json={
            "member_id": a["member_id"],
            "member_epoch": answer["member_epoch"],
            "owned": answer["assignment"],
            "wait_ms": 600,
            "session_timeout_ms": 20_000,
        },
    )
    assert quiet.status_code == 200
    assert 0.5 < time.monotonic() - started < 3.0
    bad = api.post(
        f"/groups/{group}/heartbeat",
        json={"member_id": a["member_id"], "member_epoch": 1, "wait_ms": 10**6},
    )
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42202)
