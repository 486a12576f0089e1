"""Test support: real service processes on loopback ports, unique names, shared by every suite."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: topics, groups, subjects, key prefixes."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class ServiceProcess:
    """A service started as a real process (``python -m <module>``) and stopped on exit.

    ``env`` adds to the test process's environment. ``start()`` waits until ``/healthz`` answers.
    ``kill()`` sends SIGKILL (a crash); ``stop()`` SIGTERM (a clean shutdown).
    """

    def __init__(
        self,
        module: str,
        port: int,
        env: Mapping[str, str],
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.module = module
        self.port = port
        self.env = dict(env)
        self.args = args
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServiceProcess:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.module} exited with {self.process.returncode}{self._log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.module} did not become healthy in {timeout}s{self._log_tail()}")

    def _log_tail(self) -> str:
        if self.log_path and self.log_path.exists():
            return "\n" + self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
