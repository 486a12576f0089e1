"""A redis-server process of a test's own, on a loopback port, to stop and start under a running
coordinator."""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis

from headwater_coordinator.redis_server import redis_executable
from tests.support import free_port
from tests.support.waiting import wait_until


class RedisProcess:
    """A redis-server on a loopback port, with an append-only file: stop and start keep data."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [redis_executable(), "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.directory), "--appendonly", "yes", "--save", ""]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        wait_until(self.answers, 10, "redis-server to answer")
        return self

    def answers(self) -> bool:
        client = redis.Redis(port=self.port, socket_timeout=1)
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: the append-only file is flushed
            self.process.wait(10)
