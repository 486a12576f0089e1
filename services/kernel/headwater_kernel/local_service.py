"""Services as local processes: start ``python -m services.<name>``, wait for health, stop or kill.

``headwater up``, the demo, the benchmarks and the tests all run services this way, so a container's
command is exercised as a plain process everywhere.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Self

import httpx

from headwater.closeable import Closeable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServiceProcess(Closeable, opens_with="start", closes_with="stop"):
    """A service started as a real process (``python -m <module>``) and stopped on exit.

    ``env`` adds to this process's environment. Output goes to ``log_path`` when given, to this
    process's own stdout with ``inherit_output``, else nowhere. ``start()`` waits until ``/healthz``
    answers. ``kill()`` sends SIGKILL (a crash); ``stop()`` SIGTERM (a clean shutdown).
    """

    def __init__(
        self,
        module: str,
        port: int,
        env: Mapping[str, str],
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
        *,
        inherit_output: bool = False,
        cwd: Path | None = None,
    ) -> None:
        self.module = module
        self.port = port
        self.env = dict(env)
        self.args = args
        self.log_path = log_path
        self.inherit_output = inherit_output
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Self:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        out: int | IO[bytes] | None = subprocess.DEVNULL
        if self.inherit_output:
            out = None
        elif self.log_path:
            out = open(self.log_path, "ab")  # noqa: SIM115  # the child process owns it
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            env=env,
            cwd=self.cwd,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
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
