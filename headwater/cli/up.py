"""``headwater up``: run every service as a local process on embedded defaults until Ctrl-C."""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


@dataclass(frozen=True)
class LocalService:
    """One service process as ``headwater up`` runs it: its module, port and environment."""

    name: str
    module: str
    port: int
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def local_services(data_dir: Path, brokers: int) -> list[LocalService]:
    """The platform on embedded defaults: SQLite registry, private Redis, local broker data dirs."""
    broker_urls = ",".join(f"http://127.0.0.1:{8082 + i}" for i in range(brokers))
    services = [
        LocalService(
            "registry",
            "services.registry",
            8081,
            {"REGISTRY_DATABASE_URL": f"sqlite:///{data_dir / 'registry.db'}"},
        )
    ]
    for i in range(brokers):
        services.append(
            LocalService(
                f"broker-{i}",
                "services.broker",
                8082 + i,
                {
                    "BROKER_ID": str(i),
                    "BROKER_PORT": str(8082 + i),
                    "BROKER_DATA_DIR": str(data_dir / f"broker-{i}"),
                },
            )
        )
    services.append(
        LocalService(
            "coordinator",
            "services.coordinator",
            8090,
            {
                "COORDINATOR_BROKERS": broker_urls,
                "COORDINATOR_DATA_DIR": str(data_dir / "coordinator"),
            },
        )
    )
    return [s for s in services if importlib.util.find_spec(f"{s.module}.__main__") is not None]


def wait_healthy(service: LocalService, process: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{service.url}/healthz", timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    services = local_services(data_dir, args.brokers)
    processes: list[tuple[LocalService, subprocess.Popen[bytes]]] = []

    def stop(*_: Any) -> None:
        for _service, process in processes:
            if process.poll() is None:
                process.terminate()
        for _service, process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for service in services:
            env = {**os.environ, **service.env}
            process = subprocess.Popen([sys.executable, "-m", service.module], env=env)
            processes.append((service, process))
            if not wait_healthy(service, process, timeout=60):
                print(f"headwater: {service.name} did not become healthy", file=sys.stderr)
                stop()
                return 1
            print(f"  {service.name:<12} {service.url}   (docs: {service.url}/docs)", flush=True)
        print("Headwater is up. Press Ctrl-C to stop.", flush=True)
        while all(process.poll() is None for _service, process in processes):
            time.sleep(0.5)
        for service, process in processes:
            if process.poll() is not None:
                print(
                    f"headwater: {service.name} exited with {process.returncode}", file=sys.stderr
                )
        stop()
        return 1
    except KeyboardInterrupt:
        print("\nStopping...", flush=True)
        stop()
        return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("up", help="run every service locally until Ctrl-C")
    parser.add_argument(
        "--data-dir", default="data", help="where local state lives (default ./data)"
    )
    parser.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    parser.set_defaults(func=run)
