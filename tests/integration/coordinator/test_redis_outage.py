"""The coordinator when its Redis goes away (in-process app, real redis-server processes): every
request answers 503 50311 with Retry-After, never 500; /readyz says not ready; and when Redis
answers again the coordinator carries on by itself, without expiring the members the outage
kept from heartbeating. A private redis-server that dies or loses its socket is restarted."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from tests.integration.coordinator.client import beat, join, make_topic, partitions_of
from tests.integration.coordinator.redis_process import RedisProcess
from tests.support import ServiceProcess, unique
from tests.support.waiting import wait_until


def settings(broker: ServiceProcess, **overrides: Any) -> CoordinatorSettings:
    base: dict[str, Any] = {
        "brokers": broker.url,
        "key_prefix": unique("hwtest") + ":",
        "heartbeat_interval_ms": 500,
        "sweep_interval_ms": 100,
        "lag_metrics_interval_ms": 0,
    }
    return CoordinatorSettings(**(base | overrides))


@pytest.fixture
def external(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.stop()


def test_lost_redis_is_503_with_retry_after_and_the_coordinator_reconnects(
    broker: ServiceProcess, external: RedisProcess
) -> None:
    topic, group = make_topic(broker, 2), unique("g")
    # Members' sessions are the coordinator's default, 1 s, unless they ask for another.
    app = create_app(settings(broker, redis_url=external.url, session_timeout_ms=1000))
    with TestClient(app) as api:
        member = join(api, group, [topic])
        member = beat(api, group, member)
        assert partitions_of(member) == {(topic, 0), (topic, 1)}

        external.stop()
        started = time.monotonic()
        heartbeat = {
            "member_id": member["member_id"],
            "member_epoch": member["member_epoch"],
            "owned": member["assignment"],
        }
        commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]}
        answers = [
            api.post(f"/groups/{group}/heartbeat", json=heartbeat),
            api.post(f"/groups/{group}/offsets", json=commit),
            api.get("/groups"),
            api.get(f"/groups/{group}"),
            api.get(f"/groups/{group}/offsets"),
            api.get(f"/groups/{group}/lag"),
            api.delete(f"/groups/{group}"),
        ]
        for response in answers:
            assert response.status_code == 503, response.text
            assert response.json()["error_code"] == 50311
            assert response.headers["retry-after"] == "1"
        assert time.monotonic() - started < 5  # each fails at once, none waits for a timeout
        ready = api.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["status"] == "not ready"

        # Down for longer than the member's session (1 s) and the expiry gap (2 s): the member
        # could not heartbeat meanwhile, so it must not be expired when Redis returns.
        time.sleep(2.5)
        external.start()
        wait_until(lambda: api.get("/readyz").status_code == 200, 10, "ready again")
        time.sleep(0.5)  # several sweeps, every 100 ms, before the member's next heartbeat
        response = api.post(f"/groups/{group}/heartbeat", json=heartbeat)
        assert response.status_code == 200, response.text
        assert response.json()["member_id"] == member["member_id"]
        assert partitions_of(response.json()) == {(topic, 0), (topic, 1)}
        described = api.get(f"/groups/{group}").json()
        assert [m["member_id"] for m in described["members"]] == [member["member_id"]]
        assert described["members"][0]["session_timeout_ms"] == 1000
        # And it is still expired by its own session once it stops heartbeating for real.
        time.sleep(1.5)
        assert api.get(f"/groups/{group}").json()["members"] == []


def private_socket_owner(sock: Path) -> int:
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=1)
    try:
        pid: int = client.info("server")["process_id"]
        return pid
    finally:
        client.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("fault", ["socket removed", "server killed"])
def test_private_redis_is_restarted_and_keeps_its_data(
    broker: ServiceProcess, tmp_path: Path, fault: str
) -> None:
    data = tmp_path / "coord"
    topic, group = make_topic(broker, 1, records=5), unique("g")
    with TestClient(create_app(settings(broker, redis_url="", data_dir=str(data)))) as api:
        commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 4}]}
        assert api.post(f"/groups/{group}/offsets", json=commit).status_code == 204
        sock = data / "redis.sock"
        before = private_socket_owner(sock)
        time.sleep(1.2)  # the append-only file is written every second
        if fault == "socket removed":
            # What a second instance on the same directory did: the running server's pooled
            # connections still worked, every new one failed.
            sock.unlink()
        else:
            os.kill(before, signal.SIGKILL)

        def recovered() -> bool:
            response = api.get(f"/groups/{group}/offsets")
            # Until the server is back, the answer is 503 50311 -- never a 500.
            if response.status_code != 200:
                assert (response.status_code, response.json()["error_code"]) == (503, 50311)
                return False
            return sock.exists() and api.get("/readyz").status_code == 200

        wait_until(recovered, 30, "the private redis-server back")
        after = private_socket_owner(sock)
        assert after != before
        wait_until(lambda: not alive(before), 10, "the old redis-server gone")
        offsets = api.get(f"/groups/{group}/offsets").json()["offsets"]
        assert [(o["topic"], o["partition"], o["offset"]) for o in offsets] == [(topic, 0, 4)]
    assert not sock.exists()  # stopped with the app
    assert not alive(after)
