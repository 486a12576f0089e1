"""Registry benchmark: reads by id, lookups, registrations and a 100-version transitive check.

Starts one registry process (SQLite file in a temporary directory, or ``--database-url``) on a
loopback port and drives it with httpx async clients -- 1 and 50 concurrent -- from
``--client-procs`` client processes (the client side needs CPU too, and one Python process cannot
saturate the server on its own). Prints a table with the targets beside the measurements.

    .venv/bin/python bench/registry.py [--seconds 3] [--database-url postgresql+psycopg://...]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import ServiceProcess, free_port  # noqa: E402 -- needs ROOT on sys.path

Request = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]]


def schema(name: str, fields: int) -> str:
    body = {
        "type": "record",
        "name": name,
        "fields": [{"name": f"f{i}", "type": "int", "default": i} for i in range(fields)],
    }
    return orjson.dumps(body).decode()


def make_request(kind: str, ids: list[int], subject: str, run: str) -> Request:
    known = schema("Bench", 3)

    async def by_id(client: httpx.AsyncClient, n: int) -> httpx.Response:
        return await client.get(f"/schemas/ids/{ids[n % len(ids)]}")

    async def lookup(client: httpx.AsyncClient, n: int) -> httpx.Response:
        return await client.post(f"/subjects/{subject}", json={"schema": known})

    async def register(client: httpx.AsyncClient, n: int) -> httpx.Response:
        # A new schema into its own subject each time: parse, id allocation, insert, commit.
        name = f"R{run}_{os.getpid()}_{n}"
        return await client.post(
            f"/subjects/{name}-value/versions", json={"schema": schema(name, 2)}
        )

    return {"id": by_id, "lookup": lookup, "register": register}[kind]


async def drive(
    url: str,
    kind: str,
    ids: list[int],
    subject: str,
    run: str,
    concurrency: int,
    seconds: float,
    offset: int,
) -> list[float]:
    request = make_request(kind, ids, subject, run)
    latencies: list[float] = []
    counter = iter(range(offset, offset + 10**9))
    # One client (one keep-alive connection) per simulated client: httpx's shared pool
    # serializes checkouts and at 50 connections measures itself more than the server. Clients
    # are made and connected before the clock starts.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=30) for _ in range(concurrency)
    ]
    await asyncio.gather(*(c.get("/healthz") for c in clients))
    deadline = time.perf_counter() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            n = next(counter)
            start = time.perf_counter()
            r = await request(client, n)
            latencies.append(time.perf_counter() - start)
            if r.status_code != 200:
                raise RuntimeError(f"{kind}: HTTP {r.status_code} {r.text[:200]}")

    await asyncio.gather(*(worker(c) for c in clients))
    await asyncio.gather(*(c.aclose() for c in clients))
    return latencies


def _client_proc(args: tuple[Any, ...]) -> list[float]:
    return asyncio.run(drive(*args))


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time a process has used (Linux /proc), 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    url: str,
    kind: str,
    ids: list[int],
    subject: str,
    concurrency: int,
    seconds: float,
    procs: int,
    server_pid: int | None,
) -> dict[str, float]:
    run = uuid.uuid4().hex[:6]
    procs = 1 if concurrency == 1 else procs
    per_proc = max(1, concurrency // procs)
    jobs = [(url, kind, ids, subject, run, per_proc, seconds, i * 10**9) for i in range(procs)]
    cpu_before = cpu_seconds(server_pid)
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        results = pool.map(_client_proc, jobs)
    cpu = cpu_seconds(server_pid) - cpu_before
    latencies = sorted(x for r in results for x in r)
    quantiles = statistics.quantiles(latencies, n=100)
    return {
        "rate": len(latencies) / seconds,
        "p50": quantiles[49] * 1000,
        "p99": quantiles[98] * 1000,
        # Server CPU per request (includes the few idle-loop ticks around the run).
        "cpu_us": cpu / len(latencies) * 1e6 if cpu else float("nan"),
    }


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
    return ids, subject


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--url", default="", help="an already running registry instead")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        proc = None
        pid = None
        url = args.url
        if not url:
            port = free_port()
            database = args.database_url or f"sqlite:///{tmp}/registry.db"
            env = {
                "REGISTRY_PORT": str(port),
                "REGISTRY_DATABASE_URL": database,
                "REGISTRY_LOG_LEVEL": "warning",
            }
            proc = ServiceProcess("services.registry", port, env, Path(tmp) / "registry.log")
            proc.start()
            url = proc.url
            pid = proc.process.pid if proc.process else None
        try:
            ids, subject = seed(url)
            rows = []
            targets = {"id": ">= 5000/s, p99 < 10 ms", "register": ">= 500/s", "lookup": ""}
            for kind in ("id", "lookup", "register"):
                for concurrency in (1, 50):
                    m = measure(
                        url, kind, ids, subject, concurrency, args.seconds, args.client_procs, pid
                    )
                    rows.append((kind, concurrency, m, targets[kind] if concurrency == 50 else ""))
            check_ms, register_ms = transitive_check(url, 100)
        finally:
            if proc:
                proc.stop()

    names = {
        "id": "GET /schemas/ids/{id}",
        "lookup": "POST /subjects/{s} (lookup)",
        "register": "POST .../versions (new schema)",
    }
    backend = "PostgreSQL" if "postgres" in args.database_url else "SQLite"
    load = os.getloadavg()[0]
    print(
        f"\nRegistry benchmark: {backend}, one registry process, {args.client_procs} client "
        f"processes at 50 clients, {os.cpu_count()} CPUs, load average {load:.1f} at the end"
    )
    print(
        "| operation | clients | req/s | p50 ms | p99 ms | server CPU us/req "
        "| req/s per server core | target |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for kind, concurrency, m, target in rows:
        per_core = 1e6 / m["cpu_us"] if m["cpu_us"] == m["cpu_us"] else float("nan")
        print(
            f"| {names[kind]} | {concurrency} | {m['rate']:.0f} | {m['p50']:.2f} | "
            f"{m['p99']:.2f} | {m['cpu_us']:.0f} | {per_core:.0f} | {target} |"
        )
    print(f"| transitive check, 100 versions | 1 | | {check_ms:.1f} | | | | < 100 ms |")
    print(f"| register 101st, FULL_TRANSITIVE | 1 | | {register_ms:.1f} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
