"""Consumer groups end to end: real broker and coordinator processes, members run as
``headwater consume --group`` processes; a killed member's partitions move after the session
timeout, a coordinator restart is invisible, every record is consumed at least once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from headwater import AdminClient, Producer
from headwater.groups.client import CoordinatorClient
from tests.support import ROOT, ServiceProcess, free_port, unique
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

SESSION_MS = 1500


@dataclass
class Platform:
    broker: ServiceProcess
    coordinator: ServiceProcess
    tmp: Path


@pytest.fixture
def platform(tmp_path: Path, redis_url: str, redis_prefix: str) -> Iterator[Platform]:
    port = free_port()
    broker_env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path / "broker"),
        "BROKER_FSYNC": "never",
    }
    cport = free_port()
    coordinator_env = {
        "COORDINATOR_PORT": str(cport),
        "COORDINATOR_REDIS_URL": redis_url,
        "COORDINATOR_KEY_PREFIX": redis_prefix,
        "COORDINATOR_BROKERS": f"http://127.0.0.1:{port}",
        "COORDINATOR_SESSION_TIMEOUT_MS": str(SESSION_MS),
        "COORDINATOR_HEARTBEAT_INTERVAL_MS": "200",
        "COORDINATOR_SWEEP_INTERVAL_MS": "100",
    }
    broker = ServiceProcess("headwater_broker", port, broker_env, tmp_path / "broker.log")
    coordinator = ServiceProcess(
        "headwater_coordinator", cport, coordinator_env, tmp_path / "coordinator.log"
    )
    with broker, coordinator:
        yield Platform(broker, coordinator, tmp_path)


def produce(platform: Platform, topic: str, partitions: int, *, start: int, count: int) -> None:
    with Producer({"bootstrap.servers": platform.broker.url}) as producer:
        for i in range(start, start + count):
            producer.produce(topic, b"v%d" % i, partition=i % partitions)
        assert producer.flush(30) == 0


def stable_assignment(
    client: CoordinatorClient, group: str, members: int
) -> dict[str, set[tuple[str, int]]] | None:
    g = client.describe(group)
    if g["state"] != "Stable" or len(g["members"]) != members:
        return None
    return {
        m["member_id"]: {(a["topic"], p) for a in m["assignment"] for p in a["partitions"]}
        for m in g["members"]
    }


def start_member(platform: Platform, topic: str, group: str, n: int) -> subprocess.Popen[bytes]:
    # The child writes through its own copies of the descriptors; ours close once it has them.
    with (
        open(platform.tmp / f"member-{n}.out", "wb") as out,
        open(platform.tmp / f"member-{n}.err", "wb") as err,
    ):
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "headwater_cli",
                "consume",
                topic,
                "--group",
                group,
                "--coordinator",
                platform.coordinator.url,
                "--bootstrap-server",
                platform.broker.url,
                "--from-beginning",
                "--print-offset",
            ],
            stdout=out,
            stderr=err,
            cwd=ROOT,
        )


def consumed(platform: Platform, members: int) -> list[tuple[int, int]]:
    seen = []
    for n in range(members):
        for line in (platform.tmp / f"member-{n}.out").read_text().splitlines():
            where, _, _value = line.partition("\t")
            partition, _, offset = where.partition(":")
            seen.append((int(partition), int(offset)))
    return seen


def test_failover_restart_and_at_least_once(platform: Platform) -> None:
    topic, group, partitions = unique("orders"), unique("billing"), 12
    with AdminClient({"bootstrap.servers": platform.broker.url}) as admin:
        admin.create_topic(topic, partitions)
    produce(platform, topic, partitions, start=0, count=1200)
    client = CoordinatorClient(platform.coordinator.url)
    members = [start_member(platform, topic, group, n) for n in range(3)]
    try:
        # Three members: disjoint, complete, four partitions each.
        assignment = wait_until(
            lambda: stable_assignment(client, group, 3), 20, "3 members", errors=(Exception,)
        )
        owned = list(assignment.values())
        assert sorted(len(o) for o in owned) == [4, 4, 4]
        assert set().union(*owned) == {(topic, p) for p in range(partitions)}

        # Kill one without leaving: its partitions move once its session has timed out.
        members[0].send_signal(signal.SIGKILL)
        members[0].wait()
        killed_at = time.monotonic()
        assignment = wait_until(
            lambda: stable_assignment(client, group, 2), 20, "2 members", errors=(Exception,)
        )
        moved_after = time.monotonic() - killed_at
        assert SESSION_MS / 1000 - 0.3 <= moved_after <= SESSION_MS / 1000 + 5
        owned = list(assignment.values())
        assert sorted(len(o) for o in owned) == [6, 6]
        assert set().union(*owned) == {(topic, p) for p in range(partitions)}

        produce(platform, topic, partitions, start=1200, count=1200)
        # Restart the coordinator mid-run: state is in Redis, the group carries on with the
        # same members (deadlines that fell while it was down are re-armed, not expired).
        platform.coordinator.stop()
        time.sleep(SESSION_MS / 1000)
        produce(platform, topic, partitions, start=2400, count=600)
        platform.coordinator.start()
        wait_until(
            lambda: (
                client.lag(group)["total_lag"] == 0
                and len(client.lag(group)["partitions"]) == partitions
            ),
            timeout_s=60,
            what="lag 0",
            errors=(Exception,),
        )
        assert stable_assignment(client, group, 2) == assignment
        for member in members[1:]:
            member.send_signal(signal.SIGINT)  # clean exit: commit and leave the group
        for member in members[1:]:
            assert member.wait(timeout=20) == 0
        assert client.describe(group)["state"] == "Empty"
    finally:
        for member in members:
            if member.poll() is None:
                member.kill()
                member.wait()
        client.close()

    seen = consumed(platform, 3)
    produced = {(i % partitions, i // partitions) for i in range(3000)}
    assert set(seen) == produced  # at least once, nothing skipped, nothing invented
    committed = {
        (o["partition"], o["offset"])
        for o in CoordinatorClient(platform.coordinator.url).offsets(group)["offsets"]
    }
    assert committed == {(p, 250) for p in range(partitions)}
