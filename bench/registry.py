"""Registry benchmark: reads by id, lookups, registrations and a 100-version transitive check.

Starts one registry process (SQLite file in a temporary directory, or ``--database-url``) on a
loopback port and drives it from separate client processes with a lean HTTP/1.1 client: raw
keep-alive connections on an asyncio (uvloop) event loop writing pre-built requests and parsing
only the status line and ``content-length``. That client costs a few tens of microseconds per
request, so on a small machine the server gets the CPU; an httpx client costs ~300 us per request
and measures itself more than the server (one httpx row is kept to show the difference).

Rows at 1 and 50 connections are closed loop (each connection sends its next request when the
answer arrives: the most the server does at that concurrency). The target row for id reads is open
loop: 50 connections offer 5,000 requests/s on a fixed schedule and latency counts from when each
request was due, so a stall is charged to every request it delayed. If ``wrk`` is installed, it
measures the id read once more as a cross-check.

    .venv/bin/python bench/registry.py [--seconds 3] [--repeat 3] [--client-procs 1]
        [--database-url postgresql+psycopg://...] [--url http://127.0.0.1:8081]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from headwater_kernel.local_service import ServiceProcess, free_port  # noqa: E402

ID_TARGET_RATE = 5000
NAMES = {
    "id": "GET /schemas/ids/{id}",
    "id_schema": "GET /schemas/ids/{id}/schema",
    "latest": "GET /subjects/{s}/versions/latest",
    "lookup": "POST /subjects/{s} (lookup)",
    "register": "POST .../versions (new schema)",
}


def schema(name: str, fields: int) -> str:
    body = {
        "type": "record",
        "name": name,
        "fields": [{"name": f"f{i}", "type": "int", "default": i} for i in range(fields)],
    }
    return orjson.dumps(body).decode()


@dataclass(frozen=True)
class Workload:
    """What the clients send: one kind of request against the seeded registry."""

    kind: str
    ids: list[int]
    subject: str
    run: str


def _http(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: registry\r\n"
    if method == "GET":
        return f"{head}\r\n".encode()
    return (
        f"{head}Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def request_maker(work: Workload) -> Callable[[int], bytes]:
    """Request ``n`` of a workload as the bytes to write (pre-built where it does not vary)."""
    by_id = [_http("GET", f"/schemas/ids/{i}") for i in work.ids]
    by_id_schema = [_http("GET", f"/schemas/ids/{i}/schema") for i in work.ids]
    latest = _http("GET", f"/subjects/{work.subject}/versions/latest")
    lookup = _http(
        "POST", f"/subjects/{work.subject}", orjson.dumps({"schema": schema("Bench", 3)})
    )
    pid = os.getpid()

    def register(n: int) -> bytes:
        # A new schema into its own subject each time: parse, id allocation, insert, commit.
        name = f"R{work.run}_{pid}_{n}"
        body = orjson.dumps({"schema": schema(name, 2)})
        return _http("POST", f"/subjects/{name}-value/versions", body)

    makers: dict[str, Callable[[int], bytes]] = {
        "id": lambda n: by_id[n % len(by_id)],
        "id_schema": lambda n: by_id_schema[n % len(by_id_schema)],
        "latest": lambda n: latest,
        "lookup": lambda n: lookup,
        "register": register,
    }
    return makers[work.kind]


class LeanConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection sending requests one at a time until a deadline.

    Closed loop (``interval`` 0): the next request goes out as soon as the answer is complete.
    Open loop (``interval`` > 0): request k is due at ``first_due + k * interval`` and latency is
    measured from when it was due, not when it could be sent, as wrk2 does.
    """

    def __init__(
        self,
        requests: Callable[[int], bytes],
        numbers: Iterator[int],
        latencies: list[float],
        errors: list[str],
    ) -> None:
        self.requests = requests
        self.numbers = numbers
        self.latencies = latencies
        self.errors = errors
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.due = 0.0
        self.deadline = 0.0
        self.interval = 0.0
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def start(self, first_due: float, deadline: float, interval: float) -> None:
        self.due, self.deadline, self.interval = first_due, deadline, interval
        delay = first_due - time.perf_counter()
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.send)
        else:
            self.send()

    def send(self) -> None:
        assert self.transport is not None
        if self.interval == 0.0:
            self.due = time.perf_counter()
        self.transport.write(self.requests(next(self.numbers)))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[:end]).lower()
            at = head.find(b"\r\ncontent-length:")
            length = 0
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17 : stop if stop >= 0 else len(head)])
            if len(self.buffer) < end + 4 + length:
                return
            now = time.perf_counter()
            self.latencies.append(now - self.due)
            if head[9:12] != b"200":
                body = bytes(self.buffer[end + 4 : end + 4 + length])
                self.errors.append(f"HTTP {head[9:12].decode()} {body[:200]!r}")
            del self.buffer[: end + 4 + length]
            self._next(now)

    def _next(self, now: float) -> None:
        if now >= self.deadline or self.errors:
            if not self.finished.done():
                self.finished.set_result(None)
        elif self.interval == 0.0:
            self.send()
        else:
            self.due += self.interval
            if self.due <= now:
                self.send()
            else:
                asyncio.get_running_loop().call_later(self.due - now, self.send)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_exception(ConnectionError(f"connection closed: {exc}"))


async def drive_lean(
    port: int, work: Workload, connections: int, seconds: float, rate: float, first: int
) -> tuple[list[float], float]:
    """Latencies of every request ``connections`` lean connections completed in ``seconds``,
    and the CPU seconds this process spent while they ran.

    ``rate`` > 0 spreads that many requests/s evenly over the connections (open loop).
    """
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    errors: list[str] = []
    numbers = itertools.count(first)
    requests = request_maker(work)
    conns = []
    for _ in range(connections):
        _, conn = await loop.create_connection(
            lambda: LeanConnection(requests, numbers, latencies, errors), "127.0.0.1", port
        )
        conns.append(conn)
    interval = connections / rate if rate else 0.0
    cpu = time.process_time()
    start = time.perf_counter() + 0.01
    for i, conn in enumerate(conns):
        # Open loop: connections take turns, so requests arrive evenly rather than in bursts.
        conn.start(start + i * interval / connections, start + seconds, interval)
    await asyncio.gather(*(c.finished for c in conns))
    cpu = time.process_time() - cpu
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    if errors:
        raise RuntimeError(f"{work.kind}: {errors[0]}")
    return latencies, cpu


async def drive_httpx(
    url: str, work: Workload, connections: int, seconds: float, first: int
) -> tuple[list[float], float]:
    """The id read in a closed loop through httpx: one AsyncClient (connection) per user."""
    latencies: list[float] = []
    counter = itertools.count(first)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=30) for _ in range(connections)
    ]
    await asyncio.gather(*(c.get("/healthz") for c in clients))
    cpu = time.process_time()
    deadline = time.perf_counter() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            r = await client.get(f"/schemas/ids/{work.ids[next(counter) % len(work.ids)]}")
            latencies.append(time.perf_counter() - start)
            if r.status_code != 200:
                raise RuntimeError(f"httpx: HTTP {r.status_code} {r.text[:200]}")

    await asyncio.gather(*(worker(c) for c in clients))
    cpu = time.process_time() - cpu
    await asyncio.gather(*(c.aclose() for c in clients))
    return latencies, cpu


def _client_proc(args: tuple[Any, ...]) -> tuple[list[float], float]:
    """One client process's share: its latencies and the CPU seconds it spent sending."""
    client, port, work, connections, seconds, rate, first = args
    if client == "httpx":
        url = f"http://127.0.0.1:{port}"
        return asyncio.run(drive_httpx(url, work, connections, seconds, first))
    try:
        import uvloop  # the event loop uvicorn itself runs on; optional for the benchmark

        return uvloop.run(drive_lean(port, work, connections, seconds, rate, first))
    except ImportError:
        return asyncio.run(drive_lean(port, work, connections, seconds, rate, first))


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time a process has used (Linux /proc), 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    operation: str
    client: str
    connections: int
    rate: float
    p50: float
    p99: float
    cpu_us: float
    client_cpu_us: float
    target: str = ""


def measure(
    port: int,
    work: Workload,
    connections: int,
    seconds: float,
    procs: int,
    server_pid: int | None,
    *,
    client: str = "lean",
    offered: float = 0.0,
) -> Row:
    procs = max(1, min(procs, connections))
    split = [connections // procs + (i < connections % procs) for i in range(procs)]
    jobs = [
        (client, port, work, n, seconds, offered * n / connections, i * 10**9)
        for i, n in enumerate(split)
    ]
    cpu_before = cpu_seconds(server_pid)
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        results = pool.map(_client_proc, jobs)
    cpu = cpu_seconds(server_pid) - cpu_before
    latencies = sorted(x for r, _ in results for x in r)
    client_cpu = sum(c for _, c in results)
    quantiles = statistics.quantiles(latencies, n=100)
    label = f"{client}, {offered:.0f}/s offered" if offered else client
    return Row(
        NAMES[work.kind],
        label,
        connections,
        len(latencies) / seconds,
        quantiles[49] * 1000,
        quantiles[98] * 1000,
        # Server CPU per request (includes the few idle-loop ticks around the run).
        cpu / len(latencies) * 1e6 if cpu else float("nan"),
        client_cpu / len(latencies) * 1e6,
    )


_WRK_LATENCY = re.compile(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def measure_wrk(
    port: int, ids: list[int], connections: int, seconds: float, server_pid: int | None
) -> Row | None:
    """The id read measured by ``wrk`` (C, one thread), if it is installed."""
    if shutil.which("wrk") is None:
        return None
    cpu_before = cpu_seconds(server_pid)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    url = f"http://127.0.0.1:{port}/schemas/ids/{ids[0]}"
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu = cpu_seconds(server_pid) - cpu_before
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (children.ru_utime - children_before.ru_utime) + (
        children.ru_stime - children_before.ru_stime
    )
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
    pct = {m[0]: float(m[1]) * _UNIT_MS[m[2]] for m in _WRK_LATENCY.findall(out)}
    count = rate * seconds
    cpu_us = cpu / count * 1e6 if cpu else float("nan")
    client_us = client_cpu / count * 1e6
    return Row(NAMES["id"], "wrk", connections, rate, pct["50"], pct["99"], cpu_us, client_us)


def transitive_check(url: str, versions: int) -> tuple[float, float]:
    """(ms for POST /compatibility over all versions, ms to register the next one)."""
    subject = f"transitive-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=url, timeout=60) as client:
        client.put(f"/config/{subject}", json={"compatibility": "FULL_TRANSITIVE"})
        for v in range(1, versions + 1):
            r = client.post(f"/subjects/{subject}/versions", json={"schema": schema("T", v)})
            r.raise_for_status()
        nxt = {"schema": schema("T", versions + 1)}
        checks = []
        for _ in range(5):
            start = time.perf_counter()
            r = client.post(f"/compatibility/subjects/{subject}/versions", json=nxt)
            checks.append((time.perf_counter() - start) * 1000)
            assert r.json() == {"is_compatible": True}, r.text
        start = time.perf_counter()
        client.post(f"/subjects/{subject}/versions", json=nxt).raise_for_status()
        register_ms = (time.perf_counter() - start) * 1000
    return statistics.median(checks), register_ms


def seed(url: str) -> tuple[list[int], str]:
    subject = f"bench-{uuid.uuid4().hex[:8]}"
    ids = []
    with httpx.Client(base_url=url, timeout=30) as client:
        client.put(f"/config/{subject}", json={"compatibility": "NONE"})
        for i in range(100):
            body = {"schema": schema(f"Seed{i}", 3)}
            ids.append(client.post(f"/subjects/{subject}/versions", json=body).json()["id"])
        client.post(f"/subjects/{subject}/versions", json={"schema": schema("Bench", 3)})
        # Every id read once, so the read rows measure the cache, as a deserializer sees it.
        for i in ids:
            client.get(f"/schemas/ids/{i}").raise_for_status()
            client.get(f"/schemas/ids/{i}/schema").raise_for_status()
    return ids, subject


def run_all(port: int, pid: int | None, args: argparse.Namespace) -> list[Row]:
    ids, subject = seed(f"http://127.0.0.1:{port}")
    run = uuid.uuid4().hex[:6]
    seconds, procs = args.seconds, args.client_procs
    rows: list[Row] = []

    def lean(kind: str, connections: int, offered: float = 0.0, target: str = "") -> None:
        work = Workload(kind, ids, subject, run)
        row = measure(port, work, connections, seconds, procs, pid, offered=offered)
        row.target = target
        rows.append(row)

    lean("id", 1)
    lean("id", 50)
    # The target row is repeated: on a shared machine one run's p99 says more about the
    # neighbours than about the registry.
    for _ in range(args.repeat):
        lean("id", 50, ID_TARGET_RATE, f">= {ID_TARGET_RATE}/s at p99 < 10 ms")
    if (row := measure_wrk(port, ids, 50, seconds, pid)) is not None:
        rows.append(row)
    rows.append(
        measure(port, Workload("id", ids, subject, run), 50, seconds, 2, pid, client="httpx")
    )
    lean("id_schema", 50)
    lean("latest", 50)
    lean("lookup", 1)
    lean("lookup", 50)
    lean("register", 1)
    lean("register", 50, target=">= 500/s")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument(
        "--client-procs", type=int, default=1, help="lean client processes per measurement"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of the id-read target row")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--url", default="", help="an already running registry instead")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        proc = None
        pid = None
        if args.url:
            port = int(args.url.rsplit(":", 1)[1].strip("/"))
        else:
            port = free_port()
            database = args.database_url or f"sqlite:///{tmp}/registry.db"
            env = {
                "REGISTRY_PORT": str(port),
                "REGISTRY_DATABASE_URL": database,
                "REGISTRY_LOG_LEVEL": "warning",
            }
            proc = ServiceProcess("headwater_registry", port, env, Path(tmp) / "registry.log")
            proc.start()
            pid = proc.process.pid if proc.process else None
        try:
            load_before = os.getloadavg()[0]
            rows = run_all(port, pid, args)
            check_ms, register_ms = transitive_check(f"http://127.0.0.1:{port}", 100)
        finally:
            if proc:
                proc.stop()

    backend = "PostgreSQL" if "postgres" in args.database_url else "SQLite"
    print(
        f"\nRegistry benchmark: {backend}, one registry process, {os.cpu_count()} CPUs, "
        f"{args.client_procs} lean client process(es), load average {load_before:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after"
    )
    print(
        "| operation | client | conns | req/s | p50 ms | p99 ms | server CPU us/req "
        "| req/s per server core | client CPU us/req | target |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        per_core = 1e6 / r.cpu_us if r.cpu_us == r.cpu_us else float("nan")
        print(
            f"| {r.operation} | {r.client} | {r.connections} | {r.rate:.0f} | {r.p50:.2f} | "
            f"{r.p99:.2f} | {r.cpu_us:.0f} | {per_core:.0f} | {r.client_cpu_us:.0f} | {r.target} |"
        )
    print(f"| transitive check, 100 versions | httpx | 1 | | {check_ms:.1f} | | | | | < 100 ms |")
    print(f"| register 101st, FULL_TRANSITIVE | httpx | 1 | | {register_ms:.1f} | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
