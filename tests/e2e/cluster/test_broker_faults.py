"""Brokers as real processes on one SQLite metadata file: faults a cluster must survive.

kill -9 the controller: another broker is controller within the lease plus a second and topic
admin works again. SIGSTOP the controller past its lease (outside a SQLite write transaction,
whose lock it would keep: docs/cluster.md), SIGCONT: nothing it then writes reaches the store.
kill -9 a broker: its one-replica partitions show leader -1 and answer 503 50302, then come back
with every acknowledged record. A second broker with a live broker's id is refused and the first
keeps serving. Default timings: session 1500 ms, heartbeat 250 ms, lease 2000 ms.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from headwater_broker.cluster import tables
from tests.e2e.cluster.cluster_processes import (
    LEASE_S,
    running_cluster,
    stop_outside_a_write,
    wait_for,
)
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e


def sqlite_url(root: Path) -> str:
    return f"sqlite:///{root / 'cluster.db'}"


def test_kill_the_controller_another_takes_over_and_admin_works(tmp_path: Path) -> None:
    with running_cluster(tmp_path, sqlite_url(tmp_path), 3) as cluster:
        old, epoch = cluster.controller(1)
        cluster.processes[old].kill()
        killed = time.monotonic()
        others = [i for i in cluster.processes if i != old]

        def taken_over() -> bool:
            return all(cluster.controller(i)[0] not in (old, -1) for i in others)

        wait_for(taken_over, LEASE_S + 10, "a new controller")
        took = time.monotonic() - killed
        _new, new_epoch = cluster.controller(others[0])
        assert new_epoch > epoch
        # The lease runs out at most LEASE_S after the kill; the next campaign is at most one
        # heartbeat later, and the image at most one poll behind.
        assert took < LEASE_S + 1.0
        topic = unique("after")
        created = cluster.post(others[0], "/topics", json={"name": topic, "partitions": 2})
        assert created.status_code == 201, created.text

        def led_by_live_brokers() -> bool:
            described = cluster.get(others[1], f"/topics/{topic}").json()
            return {p["leader"] for p in described["partitions"]} <= set(others)

        # Once the killed broker's session expires it is fenced and leads nothing.
        wait_for(led_by_live_brokers, 30, "every partition led by a live broker")


def test_a_controller_stopped_past_its_lease_changes_nothing_when_it_resumes(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path)
    with running_cluster(tmp_path, url, 3) as cluster:
        old, epoch = cluster.controller(1)
        others = [i for i in cluster.processes if i != old]
        process = cluster.processes[old].process
        assert process is not None
        stop_outside_a_write(process.send_signal, url)
        try:
            wait_for(
                lambda: cluster.controller(others[0])[1] > epoch,
                LEASE_S + 15,
                "a controller of a newer epoch",
            )
        finally:
            process.send_signal(signal.SIGCONT)
        # Admin sent to the resumed broker is carried out by the new controller, not by it.
        topic = unique("resumed")
        created = cluster.post(old, "/topics", json={"name": topic, "partitions": 1})
        assert created.status_code in (201, 503), created.text
        time.sleep(LEASE_S)  # whatever the old controller still tries, it has tried by now
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            c = tables.changes.c
            takeover = conn.execute(
                sa.select(sa.func.min(c.offset)).where(c.controller_epoch > epoch)
            ).scalar_one()
            late = conn.execute(
                sa.select(sa.func.count()).where(c.controller_epoch <= epoch, c.offset > takeover)
            ).scalar_one()
        engine.dispose()
        assert late == 0  # every write of the stale epoch after the takeover was refused
        assert cluster.processes[old].running()  # it stepped down; it still serves


def test_a_killed_broker_s_partitions_are_offline_then_come_back_whole(tmp_path: Path) -> None:
    with running_cluster(tmp_path, sqlite_url(tmp_path), 3) as cluster:
        topic = unique("rf1")
        created = cluster.post(0, "/topics", json={"name": topic, "replica_assignment": [[2], [1]]})
        assert created.status_code == 201, created.text
        acknowledged = []
        for i in range(20):
            answer = cluster.produce(2, topic, 0, f"v{i}".encode())
            assert answer.status_code == 200, answer.text
            acknowledged.append(f"v{i}")
        cluster.processes[2].kill()

        def offline() -> bool:
            p = cluster.get(0, f"/topics/{topic}/partitions/0").json()
            return bool(p["leader"] == -1)

        wait_for(offline, 30, "partition 0 without leader")
        refused = cluster.produce(0, topic, 0, b"lost?")
        assert (refused.status_code, refused.json()["error_code"]) == (503, 50302)
        assert refused.headers["retry-after"] == "1"
        # The other partition (on broker 1) keeps serving.
        assert cluster.produce(1, topic, 1, b"other").status_code == 200
        cluster.start(2)
        wait_for(
            lambda: cluster.get(0, f"/topics/{topic}/partitions/0").json()["leader"] == 2,
            30,
            "broker 2 leading again",
        )
        assert cluster.values(2, topic, 0) == acknowledged
        assert cluster.values(0, topic, 0) == acknowledged  # relayed from any broker


def test_a_second_broker_with_a_live_id_is_refused_and_the_first_keeps_serving(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path, sqlite_url(tmp_path), 2) as cluster:
        twin_dir, port = tmp_path / "twin", free_port()
        env = {
            **cluster.env(1, BROKER_PORT=str(port)),
            "BROKER_DATA_DIR": str(twin_dir),
        }
        twin = ServiceProcess(
            "headwater_broker", int(env["BROKER_PORT"]), env, log_path=tmp_path / "twin.log"
        )
        with pytest.raises(RuntimeError, match="exited with"):
            twin.start(timeout=60)
        assert "Broker id 1 is in use" in (tmp_path / "twin.log").read_text()
        assert cluster.processes[1].running()
        brokers = {b["broker_id"]: b for b in cluster.cluster(0)["brokers"]}
        assert brokers[1]["state"] == "active"
        assert brokers[1]["url"] == cluster.url(1)
        assert cluster.get(1, "/cluster").status_code == 200


def test_any_broker_answers_rest_requests_and_fast_paths_only_at_the_leader(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path, sqlite_url(tmp_path), 2) as cluster:
        controller, _epoch = cluster.controller(0)
        other = 1 - controller
        topic = unique("anywhere")
        # Admin at the broker that is not the controller is carried out by the controller.
        created = cluster.post(
            other, "/topics", json={"name": topic, "replica_assignment": [[controller]]}
        )
        assert created.status_code == 201, created.text
        assert created.headers["headwater-forwarded-by"] == str(other)
        assert cluster.get(other, "/topics").json().count(topic) == 1  # read-your-writes
        # REST Proxy produce, JSON fetch and offsets at the non-leader are relayed.
        produced = cluster.post(
            other,
            f"/topics/{topic}",
            json={"records": [{"value": {"n": 1}}, {"value": {"n": 2}}]},
            headers={"content-type": "application/vnd.kafka.json.v2+json"},
        )
        assert produced.status_code == 200, produced.text
        assert [o["offset"] for o in produced.json()["offsets"]] == [0, 1]
        fetched = cluster.get(
            other,
            f"/topics/{topic}/partitions/0/records",
            headers={"accept": "application/vnd.kafka.json.v2+json"},
        )
        assert [r["value"] for r in fetched.json()] == [{"n": 1}, {"n": 2}]
        offsets = cluster.get(other, f"/topics/{topic}/partitions/0/offsets").json()
        assert offsets == {"beginning_offset": 0, "end_offset": 2}
        # The fast paths answer only at the leader; the body names it.
        refused = cluster.produce(other, topic, 0, b"x")
        assert refused.status_code == 421
        assert refused.json() == {
            "error_code": 42101,
            "message": f"Broker {other} does not lead partition 0 of topic '{topic}'; "
            f"broker {controller} does",
            "leader_id": controller,
            "leader_url": cluster.url(controller),
            "leader_epoch": 0,
        }
        raw = cluster.get(
            other,
            f"/topics/{topic}/partitions/0/records",
            headers={"accept": "application/vnd.headwater.batches"},
        )
        assert (raw.status_code, raw.json()["error_code"]) == (421, 42101)
        # A request already relayed once is never relayed again.
        twice = cluster.get(
            other,
            f"/topics/{topic}/partitions/0/offsets",
            headers={"Headwater-Forwarded-By": str(controller)},
        )
        assert (twice.status_code, twice.json()["error_code"]) == (421, 42101)
        assert cluster.produce(controller, topic, 0, b"y").status_code == 200


def test_replicas_spread_over_racks_and_the_factor_is_checked(tmp_path: Path) -> None:
    racks = {0: "r0", 1: "r0", 2: "r1"}
    with running_cluster(tmp_path, sqlite_url(tmp_path), 3, racks) as cluster:
        assert {b["broker_id"]: b["rack"] for b in cluster.cluster(1)["brokers"]} == racks
        topic = unique("racks")
        created = cluster.post(
            1, "/topics", json={"name": topic, "partitions": 4, "replication_factor": 2}
        )
        assert created.status_code == 201, created.text
        for p in created.json()["partitions"]:
            replicas = [r["broker"] for r in p["replicas"]]
            assert {racks[b] for b in replicas} == {"r0", "r1"}, replicas
        leaders = [p["leader"] for p in created.json()["partitions"]]
        assert max(leaders.count(b) for b in racks) - min(leaders.count(b) for b in racks) <= 1
        default = cluster.post(0, "/topics", json={"name": unique("default")}).json()
        assert [len(p["replicas"]) for p in default["partitions"]] == [3]  # min(3, brokers)
        refused = cluster.post(0, "/topics", json={"name": "x", "replication_factor": 4})
        assert (refused.status_code, refused.json()) == (
            422,
            {
                "error_code": 42204,
                "message": "Replication factor 4 is larger than the number of active brokers, 3",
            },
        )


def test_a_broker_whose_id_was_taken_over_while_stopped_exits_non_zero(tmp_path: Path) -> None:
    with running_cluster(tmp_path, sqlite_url(tmp_path), 2) as cluster:
        old = cluster.processes[1]
        assert old.process is not None
        old.process.send_signal(signal.SIGSTOP)
        try:
            port, successor_dir = free_port(), tmp_path / "successor"
            env = {**cluster.env(1, BROKER_PORT=str(port)), "BROKER_DATA_DIR": str(successor_dir)}
            successor = ServiceProcess(
                "headwater_broker", int(env["BROKER_PORT"]), env, log_path=tmp_path / "next.log"
            )
            # The stopped broker's session expires; the successor registers the id.
            successor.start(timeout=60)
            cluster.processes[9] = successor  # stopped with the cluster
        finally:
            old.process.send_signal(signal.SIGCONT)
        assert old.process.wait(timeout=60) == 1
        assert "was replaced by another process" in (tmp_path / "broker-1.log").read_text()

        def successor_recorded() -> bool:
            brokers = {b["broker_id"]: b for b in cluster.cluster(0)["brokers"]}
            return bool(brokers[1]["url"] == successor.url and brokers[1]["state"] == "active")

        wait_for(successor_recorded, 30, "the successor recorded active under id 1")
