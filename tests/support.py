"""Test support: real service processes on loopback ports, unique names, shared by every suite."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

from headwater_kernel.local_service import ServiceProcess as _ServiceProcess
from headwater_kernel.local_service import free_port

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "ServiceProcess", "free_port", "unique"]


def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: topics, groups, subjects, key prefixes."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


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
