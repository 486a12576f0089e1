"""Coordinator: time to a stable, complete assignment after a membership change, and offset
commits per second, against a real coordinator process on real Redis and a real broker.

What is measured (loopback only, bounded):

* **rebalance** -- 100 simulated members (asyncio, an ``httpx.AsyncClient`` each) on a topic of
  1,000 partitions. Each member heartbeats at the interval the coordinator tells it and at once
  after an answer changed what it owns (a consumer that releases revoked partitions immediately,
  as the SDK does after ``on_revoke``). Timed from the request that changes membership (100 joins
  at once; one more member joining a stable group; one leaving) until ``GET /groups/{g}`` says
  ``Stable`` with every partition owned exactly once. Kafka's classic protocol waits
  ``group.initial.rebalance.delay.ms`` (3 s) before it even starts the first rebalance.
* **commits** -- ``POST /groups/{g}/offsets`` from concurrent clients: one offset per request,
  and 100 offsets per request (what a consumer with many partitions sends); offsets per second.

The coordinator runs as ``python -m headwater_coordinator`` with its private redis-server
(append-only file, as ``make up`` runs it) and Kafka's default heartbeat interval (3 s). Members
long-poll their heartbeats (``wait_ms``), as the SDK does, so they hear of a change when it
happens, not at their next heartbeat. Run: ``python bench/coordinator.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from headwater import AdminClient  # noqa: E402
from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

PARTITIONS = 1000
MEMBERS = 100


@dataclass
class SimMember:
    """A member that owns exactly what the coordinator last told it."""

    topic: str
    member_id: str | None = None
    epoch: int = 0
    owned: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False


async def member_loop(http: httpx.AsyncClient, url: str, group: str, m: SimMember) -> None:
    """Heartbeat as the SDK does: long-poll while settled, at once after a change."""
    interval_ms = 3000
    while not m.stopped:
        body: dict[str, Any] = {"member_id": m.member_id, "member_epoch": m.epoch}
        if m.epoch == 0:
            body["topics"] = [m.topic]
        else:
            body["owned"] = m.owned
            body["wait_ms"] = interval_ms
        started = time.perf_counter()
        try:
            r = await http.post(f"{url}/groups/{group}/heartbeat", json=body)
        except httpx.HTTPError:
            await asyncio.sleep(0.1)
            continue
        if r.status_code != 200:
            m.member_id, m.epoch, m.owned = None, 0, []
            continue
        answer = r.json()
        changed = answer["assignment"] != m.owned or answer["member_epoch"] != m.epoch
        m.member_id, m.epoch = answer["member_id"], answer["member_epoch"]
        m.owned = answer["assignment"]
        interval_ms = answer["heartbeat_interval_ms"]
        if not changed:
            await asyncio.sleep(max(0.0, interval_ms / 1000 - (time.perf_counter() - started)))


async def wait_stable(http: httpx.AsyncClient, url: str, group: str, members: int) -> float:
    start = time.perf_counter()
    while True:
        g = (await http.get(f"{url}/groups/{group}")).json()
        if "error_code" in g:
            if g["error_code"] != 40401:  # the group may not exist yet
                raise RuntimeError(f"describe failed: {g}")
        elif g["state"] == "Stable" and len(g["members"]) == members:
            owned = [
                (a["topic"], p)
                for m in g["members"]
                for a in m["assignment"]
                for p in a["partitions"]
            ]
            if len(owned) == PARTITIONS and len(set(owned)) == PARTITIONS:
                return time.perf_counter() - start
        await asyncio.sleep(0.05)  # describing 100 members is not free: do not crowd it


async def rebalance_bench(url: str, topic: str, rounds: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {
        "100 members join an empty group": [],
        "1 member joins (100 -> 101)": [],
        "1 member leaves (101 -> 100)": [],
    }
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        for r in range(rounds):
            group = f"bench-{os.getpid()}-{r}-{time.monotonic_ns()}"
            members = [SimMember(topic) for _ in range(MEMBERS + 1)]
            extra = members.pop()
            # One client (connection pool) per member, made before the clock starts, as
            # separate consumer processes would have: a single client's pool serving 100
            # long-polls is itself slow to hand out connections and would be measured instead.
            clients = [httpx.AsyncClient(timeout=30) for _ in range(MEMBERS + 1)]
            t0 = time.perf_counter()
            tasks = [
                asyncio.create_task(member_loop(c, url, group, m))
                for c, m in zip(clients, members, strict=False)
            ]
            await wait_stable(http, url, group, MEMBERS)
            results["100 members join an empty group"].append(time.perf_counter() - t0)
            await asyncio.sleep(0.5)
            t0 = time.perf_counter()
            tasks.append(asyncio.create_task(member_loop(clients[-1], url, group, extra)))
            await wait_stable(http, url, group, MEMBERS + 1)
            results["1 member joins (100 -> 101)"].append(time.perf_counter() - t0)
            await asyncio.sleep(0.5)
            leaver = members[0]
            leaver.stopped = True
            await asyncio.sleep(0)  # its loop may be mid-request; leave after it
            t0 = time.perf_counter()
            await http.post(
                f"{url}/groups/{group}/heartbeat",
                json={"member_id": leaver.member_id, "member_epoch": -1},
            )
            await wait_stable(http, url, group, MEMBERS)
            results["1 member leaves (101 -> 100)"].append(time.perf_counter() - t0)
            for m in [*members, extra]:
                m.stopped = True
            for m in [*members[1:], extra]:  # leaving also answers their parked heartbeats
                with contextlib.suppress(httpx.HTTPError):
                    await http.post(
                        f"{url}/groups/{group}/heartbeat",
                        json={"member_id": m.member_id, "member_epoch": -1},
                    )
            await asyncio.gather(*tasks)
            for client in clients:
                await client.aclose()
    return results


async def commit_bench(
    url: str, topic: str, *, per_request: int, seconds: float, concurrency: int
) -> float:
    """Offsets committed per second (simple commits to groups without members)."""
    done = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(w: int, http: httpx.AsyncClient) -> None:
        nonlocal done
        group = f"commit-{os.getpid()}-{w}"
        i = 0
        while time.perf_counter() < deadline:
            offsets = [
                {"topic": topic, "partition": (i + k) % PARTITIONS, "offset": 1}
                for k in range(per_request)
            ]
            r = await http.post(f"{url}/groups/{group}/offsets", json={"offsets": offsets})
            assert r.status_code == 204, r.text
            done += per_request
            i += per_request

    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(worker(w, http) for w in range(concurrency)))
        return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=5.0, help="per commit measurement")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hw-bench-coord-") as tmp:
        base = Path(tmp)
        bport, cport = free_port(), free_port()
        broker = ServiceProcess(
            "headwater_broker",
            bport,
            {
                "BROKER_PORT": str(bport),
                "BROKER_DATA_DIR": str(base / "broker"),
                "BROKER_FSYNC": "never",
            },
            base / "broker.log",
        ).start()
        coordinator = None
        try:
            broker_url = f"http://127.0.0.1:{bport}"
            topic = f"bench-{os.getpid()}"
            with AdminClient({"bootstrap.servers": broker_url}) as admin:
                admin.create_topic(topic, PARTITIONS)
            with httpx.Client(base_url=broker_url) as http:
                for p in range(PARTITIONS):  # one record per partition: offset 1 is the log end
                    http.post(
                        f"/topics/{topic}/partitions/{p}", json={"records": [{"value": p}]}
                    ).raise_for_status()
            coordinator = ServiceProcess(
                "headwater_coordinator",
                cport,
                {
                    "COORDINATOR_PORT": str(cport),
                    "COORDINATOR_REDIS_URL": "",
                    "COORDINATOR_DATA_DIR": str(base / "coordinator"),
                    "COORDINATOR_BROKERS": broker_url,
                    "COORDINATOR_HEARTBEAT_INTERVAL_MS": str(args.heartbeat_interval_ms),
                    "COORDINATOR_LOG_LEVEL": "warning",
                },
                base / "coordinator.log",
            ).start()
            url = f"http://127.0.0.1:{cport}"
            rebalances = asyncio.run(rebalance_bench(url, topic, args.rounds))
            commits_1 = asyncio.run(
                commit_bench(url, topic, per_request=1, seconds=args.seconds, concurrency=16)
            )
            commits_100 = asyncio.run(
                commit_bench(url, topic, per_request=100, seconds=args.seconds, concurrency=8)
            )
        finally:
            for process in (coordinator, broker):
                if process is not None:
                    process.stop()

    print()
    print(
        f"Coordinator, {MEMBERS} members x {PARTITIONS} partitions, heartbeat interval "
        f"{args.heartbeat_interval_ms} ms, {args.rounds} rounds (median / max)"
    )
    print(f"{'measurement':<38} {'result':>18} {'target':>12} {'Kafka classic':>22}")
    print("-" * 94)
    for name, times in rebalances.items():
        result = f"{statistics.median(times) * 1000:.0f} / {max(times) * 1000:.0f} ms"
        print(f"{name:<38} {result:>18} {'< 500 ms':>12} {'>= 3000 ms (delay)':>22}")
    for label, rate in (
        ("commits, 1 offset/request (16 conc.)", commits_1),
        ("commits, 100 offsets/request (8 conc.)", commits_100),
    ):
        print(f"{label:<38} {rate:>14,.0f} /s {'>= 20,000/s':>12} {'-':>22}")


if __name__ == "__main__":
    main()
