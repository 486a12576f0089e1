"""``headwater up``: run every service as a local process on embedded defaults until Ctrl-C.

One instance per data directory and per set of ports. Before starting anything, ``up`` takes the
data directory's lock (:class:`~headwater_kernel.directory_lock.DirectoryLock`, noting its pid,
services and URLs) and checks that every port is free; a second instance refuses, naming what
holds them, instead of sharing the first one's files (its private Redis would remove the first
one's socket). The services inherit the lock, so services left running by a killed ``up`` still
keep the directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater_cli.endpoints import exports, identify
from headwater_kernel.directory_lock import DirectoryInUseError, DirectoryLock
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


def in_use(error: DirectoryInUseError) -> str:
    """Who holds the data directory, from the note its ``headwater up`` left in the lock."""
    note = error.holder
    pid = note.get("pid")
    services: dict[str, Any] = note.get("services") or {}
    pids: dict[str, Any] = note.get("pids") or {}
    listing = ", ".join(
        f"{name} {url}" + (f" (pid {pids[name]})" if name in pids else "")
        for name, url in services.items()
    )
    if isinstance(pid, int) and _alive(pid):
        return (
            f"data directory {error.directory} is in use by another headwater up (pid {pid}, "
            f"started {note.get('started', '?')}): {listing or 'starting'}. Stop it first "
            f"(Ctrl-C in its terminal, or kill {pid}), or give this one another --data-dir"
        )
    left = " ".join(str(p) for p in pids.values())
    return (
        f"data directory {error.directory} is still held by the services of a headwater up "
        f"that is gone (pid {pid}): {listing or '?'}. Stop them first"
        + (f" (kill {left})" if left else "")
        + ", or give this one another --data-dir"
    )


def port_taken(service: LocalService) -> str | None:
    """Why ``service`` cannot listen on its port, or None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As uvicorn's own socket: a port whose old connections linger in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", service.port))
            return None
        except OSError:
            pass
    who = identify(service.url)
    holder = "a program that does not answer HTTP" if who is None else str(who)
    return f"port {service.port} ({service.name}) is taken by {holder}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's process
    return True


def run(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    services = local_services(data_dir, args.port_offset)
    lock = DirectoryLock(data_dir)
    try:
        lock.acquire({"command": "headwater up", "services": {s.name: s.url for s in services}})
    except DirectoryInUseError as exc:
        print(f"headwater up: {in_use(exc)}", file=sys.stderr)
        return 1
    with lock:
        taken = [reason for s in services if (reason := port_taken(s)) is not None]
        if taken:
            for reason in taken:
                print(f"headwater up: {reason}", file=sys.stderr)
            print(
                "headwater up: nothing was started. Is another headwater up running? Stop it, "
                "or move this one with --port-offset (e.g. --port-offset 1000)",
                file=sys.stderr,
            )
            return 1
        return _serve(services, lock, args.port_offset)


def _serve(services: list[LocalService], lock: DirectoryLock, port_offset: int) -> int:
    running: list[ServiceProcess] = []
    pids: dict[str, int | None] = {}

    def stop_all() -> None:
        for process in reversed(running):
            process.stop()

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a container runtime or systemd stops us the way Ctrl-C does

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for service in services:
            process = ServiceProcess(
                service.module,
                service.port,
                service.env,
                inherit_output=True,
                pass_fds=(lock.fileno(),),  # the services hold the data directory too
            )
            running.append(process)
            try:
                process.start(timeout=60)
            except RuntimeError as exc:
                print(f"headwater up: {service.name} did not start: {exc}", file=sys.stderr)
                stop_all()
                return 1
            pids[service.name] = process.pid
            lock.update({"pids": pids})
            print(f"  {service.name:<12} {service.url}   (docs: {service.url}/docs)", flush=True)
        if port_offset:
            # Every command reads these, so one paste aims the CLI at this instance.
            print("Point the CLI at these ports (in another shell):")
            for name, value in exports(port_offset).items():
                print(f"  export {name}={value}")
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
    parser = subparsers.add_parser(
        "up",
        help="run every service locally until Ctrl-C",
        description="Run the registry, a broker and the coordinator as local processes, with "
        "their state under --data-dir, until Ctrl-C or SIGTERM. One instance per data "
        "directory and per set of ports: a second one refuses before starting anything.",
    )
    parser.add_argument(
        "--data-dir", default="data", help="where local state lives (default ./data)"
    )
    parser.add_argument(
        "--port-offset",
        type=int,
        default=0,
        help="add this to every default port (registry 8081, broker 8082, coordinator 8090) "
        "and print the HEADWATER_* variables that point the CLI there",
    )
    parser.set_defaults(func=run)
