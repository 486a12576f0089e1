"""``headwater up``: run every service as a local process on embedded defaults until Ctrl-C."""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater_kernel.local_service import ServiceProcess


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


def local_services(data_dir: Path, port_offset: int = 0) -> list[LocalService]:
    """The platform on embedded defaults: SQLite registry, private Redis, a local broker data dir.

    Ports are the defaults (registry 8081, broker 8082, coordinator 8090) plus ``port_offset``.
    """
    registry, broker, coordinator = 8081 + port_offset, 8082 + port_offset, 8090 + port_offset
    services = [
        LocalService(
            "registry",
            "headwater_registry",
            registry,
            {
                "REGISTRY_PORT": str(registry),
                "REGISTRY_DATABASE_URL": f"sqlite:///{data_dir / 'registry.db'}",
            },
        ),
        LocalService(
            "broker-0",
            "headwater_broker",
            broker,
            {
                "BROKER_ID": "0",
                "BROKER_PORT": str(broker),
                "BROKER_DATA_DIR": str(data_dir / "broker-0"),
            },
        ),
        LocalService(
            "coordinator",
            "headwater_coordinator",
            coordinator,
            {
                "COORDINATOR_PORT": str(coordinator),
                "COORDINATOR_BROKERS": f"http://127.0.0.1:{broker}",
                "COORDINATOR_DATA_DIR": str(data_dir / "coordinator"),
            },
        ),
    ]
    return [s for s in services if importlib.util.find_spec(f"{s.module}.__main__") is not None]


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    running: list[ServiceProcess] = []

    def stop_all() -> None:
        for process in reversed(running):
            process.stop()

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a container runtime or systemd stops us the way Ctrl-C does

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for service in local_services(data_dir, args.port_offset):
            process = ServiceProcess(service.module, service.port, service.env, inherit_output=True)
            running.append(process)
            try:
                process.start(timeout=60)
            except RuntimeError as exc:
                print(f"headwater: {service.name} did not start: {exc}", file=sys.stderr)
                stop_all()
                return 1
            print(f"  {service.name:<12} {service.url}   (docs: {service.url}/docs)", flush=True)
        print("Headwater is up. Press Ctrl-C to stop.", flush=True)
        while all(process.running() for process in running):
            time.sleep(0.5)
        for process in running:
            if not process.running():
                print(f"headwater: {process.module} exited", file=sys.stderr)
        stop_all()
        return 1
    except KeyboardInterrupt:
        print("\nStopping...", flush=True)
        stop_all()
        return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("up", help="run every service locally until Ctrl-C")
    parser.add_argument(
        "--data-dir", default="data", help="where local state lives (default ./data)"
    )
    parser.add_argument(
        "--port-offset",
        type=int,
        default=0,
        help="add this to every default port (registry 8081, broker 8082, coordinator 8090)",
    )
    parser.set_defaults(func=run)
