"""The cluster's timings, measured in one run on three broker processes sharing a SQLite file.

What is measured (loopback only; default timings: session 1500 ms, heartbeat 250 ms, lease
2000 ms, metadata poll 100 ms):

* **controller failover** -- kill -9 the controller; the time until every other broker's
  ``GET /cluster`` names a new controller. Five rounds (the killed broker is started again
  between rounds); median and max. Beside it, the bound the design gives: the lease, plus one
  campaign interval (heartbeat) and one metadata poll.
* **topic create** -- ``POST /topics`` (one partition) answered by the controller itself, and
  sent to a broker that relays it to the controller; p50 and p99.
* **metadata propagation** -- after a create answered by the controller, the time until each
  other broker describes the topic (``GET /topics/{t}`` polled every 5 ms); p50 and p99 over
  every (topic, broker) pair. Beside it, the bound: one poll interval plus one query.

Then the replication section (``bench/replication.py``: ingest RF=1 vs RF=3, produce-to-consume
latency, unavailability after kill -9 of a leader, failed sends over SIGTERMs of a leader) on a
cluster of its own.

Run: ``python bench/cluster.py`` (``--quick`` for fewer rounds, ``--no-replication`` without the
replication section). Other work on the machine moves
the numbers: read them as indicative, and compare rows of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import replication  # noqa: E402
from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

LEASE_MS = 2000
HEARTBEAT_MS = 250
POLL_MS = 100


class Cluster:
    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        self.ports = {i: free_port() for i in range(size)}
        self.processes: dict[int, ServiceProcess] = {}
        self.client = httpx.Client(timeout=30.0)

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i: int) -> None:
        env = {
            "BROKER_ID": str(i),
            "BROKER_PORT": str(self.ports[i]),
            "BROKER_DATA_DIR": str(self.root / f"broker-{i}"),
            "BROKER_METADATA_URL": f"sqlite:///{self.root / 'cluster.db'}",
            "BROKER_FSYNC": "never",
            "BROKER_LOG_LEVEL": "warning",
        }
        process = ServiceProcess(
            "headwater_broker", self.ports[i], env, log_path=self.root / f"broker-{i}.log", cwd=ROOT
        )
        process.start(timeout=120)
        self.processes[i] = process

    def controller(self, i: int) -> int:
        return int(self.client.get(self.url(i) + "/cluster").json()["controller"]["broker_id"])

    def all_active(self) -> bool:
        brokers = self.client.get(self.url(0) + "/cluster").json()["brokers"]
        return len(brokers) == len(self.ports) and all(b["state"] == "active" for b in brokers)

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()
        self.client.close()


def wait(check: Callable[[], bool], timeout_s: float, step_s: float = 0.005) -> float:
    """Seconds until ``check()`` is true (polled every ``step_s``); raises after ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if check():
                return time.monotonic() - start
        except httpx.HTTPError:
            pass
        time.sleep(step_s)
    raise TimeoutError(f"not within {timeout_s} s")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def failover(cluster: Cluster, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        wait(cluster.all_active, 60, 0.05)
        old = cluster.controller(0)
        others = [i for i in cluster.processes if i != old]
        cluster.processes[old].kill()

        def taken_over(old: int = old, others: list[int] = others) -> bool:
            return all(cluster.controller(i) not in (old, -1) for i in others)

        times.append(wait(taken_over, 30, 0.01))
        cluster.start(old)
    return times


def creates(cluster: Cluster, count: int) -> tuple[list[float], list[float], list[float]]:
    wait(cluster.all_active, 60, 0.05)
    controller = cluster.controller(0)
    relay = next(i for i in cluster.processes if i != controller)
    at_controller, relayed, lags = [], [], []
    for n in range(count):
        name = f"bench-{uuid.uuid4().hex[:8]}"
        start = time.monotonic()
        answer = cluster.client.post(cluster.url(controller) + "/topics", json={"name": name})
        answered = time.monotonic()
        assert answer.status_code == 201, answer.text
        at_controller.append(answered - start)
        for i in cluster.processes:
            if i == controller:
                continue

            def described(url: str = f"{cluster.url(i)}/topics/{name}") -> bool:
                return cluster.client.get(url).status_code == 200

            wait(described, 10, 0.005)
            lags.append(time.monotonic() - answered)
        start = time.monotonic()
        answer = cluster.client.post(cluster.url(relay) + "/topics", json={"name": f"{name}-r{n}"})
        relayed.append(time.monotonic() - start)
        assert answer.status_code == 201, answer.text
    return at_controller, relayed, lags


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument(
        "--no-replication", action="store_true", help="skip the replication section"
    )
    args = parser.parse_args()
    rounds, count = (3, 10) if args.quick else (5, 40)
    with tempfile.TemporaryDirectory(prefix="hw-bench-cluster-") as tmp:
        cluster = Cluster(Path(tmp), 3)
        try:
            for i in range(3):
                cluster.start(i)
            at_controller, relayed, lags = creates(cluster, count)
            failovers = failover(cluster, rounds)
        finally:
            cluster.stop()
    bound_failover = (LEASE_MS + HEARTBEAT_MS + POLL_MS) / 1000
    rows = [
        ("what", "measured", "design bound / comparison"),
        (
            f"controller failover after kill -9, median of {rounds}",
            ms(statistics.median(failovers)),
            f"lease + heartbeat + poll = {ms(bound_failover).strip()}",
        ),
        (f"controller failover after kill -9, max of {rounds}", ms(max(failovers)), ""),
        (
            f"topic create at the controller, p50 ({count})",
            ms(percentile(at_controller, 0.5)),
            f"p99 {ms(percentile(at_controller, 0.99)).strip()}",
        ),
        (
            f"topic create relayed by another broker, p50 ({count})",
            ms(percentile(relayed, 0.5)),
            f"p99 {ms(percentile(relayed, 0.99)).strip()}",
        ),
        (
            f"metadata propagation to every broker, p50 ({len(lags)})",
            ms(percentile(lags, 0.5)),
            f"poll interval {POLL_MS} ms + one query",
        ),
        (
            f"metadata propagation to every broker, p99 ({len(lags)})",
            ms(percentile(lags, 0.99)),
            "",
        ),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not args.no_replication:
        print()
        print("replication (bench/replication.py, a cluster of its own):")
        asyncio.run(replication.run(args.quick))


if __name__ == "__main__":
    main()
