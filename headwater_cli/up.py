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
from headwater_kernel.local_service import ServiceProcess, cluster_broker_env


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


MAX_BROKERS = 8  # ports 8082..8089: the coordinator's 8090 comes next
RESTART_DELAY_S = 2.0


def local_services(data_dir: Path, port_offset: int = 0, brokers: int = 3) -> list[LocalService]:
    """The platform on embedded defaults: SQLite registry, private Redis, ``brokers`` brokers.

    Ports are the defaults (registry 8081, brokers 8082 upward, coordinator 8090) plus
    ``port_offset``. The brokers form one cluster on a shared SQLite file
    (``<data dir>/cluster.db``), each with its own data directory (``broker-<id>``).
    """
    if not 1 <= brokers <= MAX_BROKERS:
        raise ValueError(f"--brokers must be between 1 and {MAX_BROKERS}, got {brokers}")
    registry, broker, coordinator = 8081 + port_offset, 8082 + port_offset, 8090 + port_offset
    metadata_url = f"sqlite:///{data_dir / 'cluster.db'}"
    broker_services = [
        LocalService(
            f"broker-{i}",
            "headwater_broker",
            broker + i,
            cluster_broker_env(i, broker + i, data_dir, metadata_url),
        )
        for i in range(brokers)
    ]
    broker_urls = ",".join(s.url for s in broker_services)
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
        *broker_services,
        LocalService(
            "coordinator",
            "headwater_coordinator",
            coordinator,
            {
                "COORDINATOR_PORT": str(coordinator),
                "COORDINATOR_BROKERS": broker_urls,
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
    try:
        services = local_services(data_dir, args.port_offset, args.brokers)
    except ValueError as exc:
        print(f"headwater up: {exc}", file=sys.stderr)
        return 2
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


def _process(service: LocalService, lock: DirectoryLock) -> ServiceProcess:
    return ServiceProcess(
        service.module,
        service.port,
        service.env,
        inherit_output=True,
        pass_fds=(lock.fileno(),),  # the services hold the data directory too
    )


def _serve(services: list[LocalService], lock: DirectoryLock, port_offset: int) -> int:
    running: list[ServiceProcess] = []
    pids: dict[str, int | None] = {}
    by_process: dict[int, LocalService] = {}

    def stop_all() -> None:
        for process in reversed(running):
            process.stop()

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a container runtime or systemd stops us the way Ctrl-C does

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for service in services:
            process = _process(service, lock)
            running.append(process)
            by_process[id(process)] = service
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
        while True:
            time.sleep(0.5)
            for i, process in enumerate(running):
                if process.running():
                    continue
                service = by_process[id(process)]
                if service.module != "headwater_broker":
                    print(f"headwater: {service.name} exited; stopping", file=sys.stderr)
                    stop_all()
                    return 1
                # A broker that dies is started again; the rest of the cluster keeps serving.
                print(
                    f"headwater: {service.name} exited; starting it again in "
                    f"{RESTART_DELAY_S:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(RESTART_DELAY_S)
                again = _process(service, lock)
                running[i] = again
                by_process[id(again)] = service
                try:
                    again.start(timeout=60)
                except RuntimeError as exc:
                    print(f"headwater: {service.name} did not start: {exc}", file=sys.stderr)
                    continue  # tried again on the next turn
                pids[service.name] = again.pid
                lock.update({"pids": pids})
                print(f"headwater: {service.name} is back at {service.url}", flush=True)
    except KeyboardInterrupt:
        print("\nStopping...", flush=True)
        stop_all()
        return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "up",
        help="run every service locally until Ctrl-C",
        description="Run the registry, a cluster of brokers and the coordinator as local "
        "processes, with their state under --data-dir, until Ctrl-C or SIGTERM. A broker that "
        "dies is started again after a couple of seconds. One instance per data directory and "
        "per set of ports: a second one refuses before starting anything.",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=3,
        help=f"how many brokers form the cluster (ports 8082 upward; 1..{MAX_BROKERS}, default 3)",
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
