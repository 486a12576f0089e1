"""Offset routes (in-process app, real Redis) against a real broker process: commit rules and
their error codes, committed offsets, lag, resets of every strategy, and deleting a group."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.integration.coordinator.client import beat, join, make_topic, partitions_of
from tests.support import ServiceProcess, unique


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
