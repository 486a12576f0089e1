"""The heartbeat route (in-process app, real Redis) against a real broker process: join and
assignment, new partitions, error codes that change nothing, expiry, long-polled heartbeats."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headwater import AdminClient
from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from headwater_kernel.clock import ManualClock
from tests.integration.coordinator.client import beat, join, make_topic, partitions_of
from tests.support import ServiceProcess, unique


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


def test_new_partitions_are_assigned(
    broker: ServiceProcess, redis_url: str, redis_prefix: str
) -> None:
    """The coordinator caches a topic's metadata for 2 s (on its clock, moved here by hand):
    within that time a grown topic is not seen; past it, the next heartbeats assign the new
    partition."""
    clock = ManualClock()
    settings = CoordinatorSettings(
        redis_url=redis_url, key_prefix=redis_prefix, brokers=broker.url, sweep_interval_ms=100
    )
    with TestClient(create_app(settings, clock=clock)) as api:
        topic, group = make_topic(broker, 2), unique("g")
        member = join(api, group, [topic], session_timeout_ms=10_000)
        assert partitions_of(member) == {(topic, 0), (topic, 1)}
        with AdminClient({"bootstrap.servers": broker.url}) as admin:
            admin.create_partitions(topic, 3)
        clock.advance(1.9)
        member = beat(api, group, member)
        assert partitions_of(member) == {(topic, 0), (topic, 1)}  # still the cached count
        clock.advance(0.2)
        deadline = time.monotonic() + 5  # refreshed in the background: a heartbeat or two later
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
        # Integers are JSON integers: no booleans, no numbers in strings.
        ({"member_epoch": False, "topics": ["t"]}, 422, 42200),
        ({"member_epoch": "0", "topics": ["t"]}, 422, 42200),
        ({"member_epoch": 0, "topics": ["t"], "wait_ms": True}, 422, 42200),
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


def test_expired_member_is_removed_by_the_sweep(
    broker: ServiceProcess, redis_url: str, redis_prefix: str
) -> None:
    """Sessions run on the coordinator's clock, moved here by hand: a member silent past its
    10 s session is expired by the sweep and its partitions move, one still inside its own
    60 s session stays; no second of real time is waited out."""
    clock = ManualClock()
    settings = CoordinatorSettings(
        redis_url=redis_url, key_prefix=redis_prefix, brokers=broker.url, sweep_interval_ms=100
    )
    with TestClient(create_app(settings, clock=clock)) as api:
        topic, group = make_topic(broker, 4), unique("g")
        dead = join(api, group, [topic], session_timeout_ms=10_000)
        live = join(api, group, [topic], session_timeout_ms=60_000)
        live = beat(api, group, live, session_timeout_ms=60_000)
        clock.advance(9.9)
        live = beat(api, group, live, session_timeout_ms=60_000)
        members = api.get(f"/groups/{group}").json()["members"]
        assert len(members) == 2  # the silent one is still inside its session
        clock.advance(0.2)
        deadline = time.monotonic() + 5  # the sweeper wakes on the clock, in the app's loop
        while len(partitions_of(live)) < 4 and time.monotonic() < deadline:
            live = beat(api, group, live, session_timeout_ms=60_000)
            time.sleep(0.02)
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


def test_a_parked_heartbeat_returns_as_soon_as_the_group_changes(
    api: TestClient, broker: ServiceProcess
) -> None:
    import threading

    topic, group = make_topic(broker, 4), unique("g")
    a = join(api, group, [topic], session_timeout_ms=20_000)
    a = beat(api, group, a)
    for _ in range(20):  # until stable: a beat that brings no news (owns all four)
        again = beat(api, group, a)
        if (again["member_epoch"], again["assignment"]) == (a["member_epoch"], a["assignment"]):
            break
        a = again
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
