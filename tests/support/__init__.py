"""Test support: real service processes on loopback ports, unique names, shared by every suite.

``tests.support.waiting`` polls for a condition (``wait_until``), ``tests.support.cluster``
runs brokers as one cluster of processes (``BrokerCluster``), ``tests.support.schemas`` holds
the shared ``shop.Order`` schema, and ``tests.support.lazyfs`` adds a filesystem that loses
unsynced writes, for power-loss tests.
"""

from __future__ import annotations

import random
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path

from headwater_kernel.local_service import ServiceProcess as _ServiceProcess
from headwater_kernel.local_service import free_port, port_range

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "ServiceProcess", "free_port", "port_offset_with_free_ports", "unique"]


def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: topics, groups, subjects, key prefixes."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def port_offset_with_free_ports() -> int:
    """An offset that moves 8081, 8082-8084 (three brokers) and 8090 onto free ports below the
    ephemeral range, within this test worker's port range (``local_service.port_range``).

    Ports from the kernel's ephemeral range (32768+) may be taken at any moment by an outgoing
    connection's local end, so the offsets stay below it.
    """
    low, high = port_range()
    if high <= low:
        low, high = 28081, 32090  # the ephemeral range is unknown: the offsets of before
    rng = random.Random()
    for _ in range(200):
        offset = rng.randrange(low - 8081, high - 8090)
        if all(_bindable(port + offset) for port in (8081, 8082, 8083, 8084, 8090)):
            return offset
    raise RuntimeError("no free port range found")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class ServiceProcess(_ServiceProcess):
    """A service process run from the repository root (see ``headwater_kernel.local_service``)."""

    def __init__(
        self,
        module: str,
        port: int,
        env: Mapping[str, str],
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        super().__init__(module, port, env, log_path, args, cwd=ROOT)
