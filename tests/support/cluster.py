"""Broker processes forming one cluster on a shared metadata database: the fault tests' harness.

Each broker runs with ``headwater up``'s environment (``local_service.cluster_broker_env``) on a
free loopback port of this test worker, with its own data directory and log file under ``root``;
any one can be killed (``processes[id].kill()``, SIGSTOP, ...) and started again with the same
id, port and data. The suites' own cluster classes add what they look at on top of this.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from headwater_kernel.local_service import cluster_broker_env
from headwater_kernel.security.tls import client_context, tls_files_in
from tests.support import ServiceProcess, free_port
from tests.support.waiting import wait_until


class BrokerCluster:
    """Brokers ``0 .. size-1``; ``env`` is added to every broker's environment (fsync off
    unless it says otherwise: the fault tests kill processes, not machines)."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        metadata_url: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.size = size
        self.metadata_url = metadata_url or f"sqlite:///{root / 'cluster.db'}"
        self.common_env = {"BROKER_FSYNC": "never", **(env or {})}
        tls = tls_files_in(self.common_env)
        self.scheme = "https" if tls else "http"
        # With TLS on, what the harness's own requests verify the brokers with and present.
        self.verify: ssl.SSLContext | bool = True if tls is None else client_context(*tls)
        self.ports = {b: free_port() for b in range(size)}
        self.processes: dict[int, ServiceProcess] = {}
        self.start_timeout_s = 60.0

    def url(self, broker_id: int) -> str:
        return f"{self.scheme}://127.0.0.1:{self.ports[broker_id]}"

    def env(self, broker_id: int, **extra: str) -> dict[str, str]:
        """Broker ``broker_id``'s environment, with ``extra`` on top."""
        base = cluster_broker_env(broker_id, self.ports[broker_id], self.root, self.metadata_url)
        return {**base, **self.common_env, **extra}

    def start(self, broker_id: int, **extra: str) -> ServiceProcess:
        """Start (or start again) broker ``broker_id``; ``extra`` adds to its environment."""
        process = ServiceProcess(
            "headwater_broker",
            self.ports[broker_id],
            self.env(broker_id, **extra),
            log_path=self.root / f"broker-{broker_id}.log",
        )
        self.processes[broker_id] = process
        process.start(timeout=self.start_timeout_s)
        return process

    def restart(self, broker_id: int, timeout_s: float = 30.0) -> ServiceProcess:
        """Start ``broker_id`` again; its earlier incarnation may hold the id until its session
        runs out, so a refused start is tried again (bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.start(broker_id)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def start_all(self, timeout_s: float = 60.0) -> None:
        """Start every broker and wait until the cluster counts all of them active."""
        for broker_id in range(self.size):
            self.start(broker_id)
        self.wait_all_active(timeout_s)

    def running(self) -> list[int]:
        """Brokers whose process is alive (stopped or cut off ones included)."""
        return [b for b, p in self.processes.items() if p.running()]

    def active(self) -> list[int]:
        """The brokers the cluster counts active, as the first running broker that answers
        sees them."""
        for broker_id in self.running():
            try:
                answer = httpx.get(f"{self.url(broker_id)}/cluster", timeout=5, verify=self.verify)
                body = answer.json()
            except httpx.HTTPError:
                continue
            return sorted(b["broker_id"] for b in body["brokers"] if b["state"] == "active")
        return []

    def wait_all_active(self, timeout_s: float = 60.0) -> None:
        wanted = sorted(self.processes)
        wait_until(
            lambda: self.active() == wanted,
            timeout_s,
            "every broker active",
            errors=(httpx.HTTPError, KeyError, ValueError),
        )

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.stop()
