"""The private redis-server (real processes): one per data directory, and it removes only the
socket it made -- a second coordinator on the same directory once removed the first one's."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from headwater_coordinator.redis_server import PrivateRedis


def answers(sock: Path) -> bool:
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def test_a_second_server_on_the_same_directory_refuses_and_removes_nothing(
    tmp_path: Path,
) -> None:
    first = PrivateRedis(tmp_path).start()
    try:
        second = PrivateRedis(tmp_path)
        with pytest.raises(RuntimeError, match="another coordinator"):
            second.start()
        second.stop()
        assert answers(first.socket)
        assert first.intact()
    finally:
        first.stop()
    assert not first.socket.exists()


def test_a_socket_left_by_a_killed_server_is_replaced(tmp_path: Path) -> None:
    first = PrivateRedis(tmp_path).start()
    assert first.process is not None
    first.process.kill()
    first.process.wait()
    assert first.socket.exists()
    assert not first.intact()
    second = PrivateRedis(tmp_path).start()
    try:
        assert answers(second.socket)
    finally:
        second.stop()


def test_stop_leaves_a_socket_that_is_not_its_own(tmp_path: Path) -> None:
    first = PrivateRedis(tmp_path).start()
    first.socket.unlink()  # removed from under it...
    assert not first.intact()
    second = PrivateRedis(tmp_path).start()  # ...and another server took the path
    try:
        first.stop()
        assert answers(second.socket)
    finally:
        second.stop()
    assert not second.socket.exists()


def test_a_stop_during_a_restart_leaves_no_server_behind(tmp_path: Path) -> None:
    # The watcher restarts the server in a worker thread, which cancelling the watcher at
    # shutdown does not stop: stop() must win over that restart, whichever runs first.
    server = PrivateRedis(tmp_path).start()
    first = server.process
    assert first is not None
    restarting = threading.Thread(target=server.restart)
    restarting.start()
    time.sleep(0.05)  # the restart is under way (stopping the first server or starting anew)
    server.stop()
    restarting.join(timeout=30)
    assert not restarting.is_alive()
    assert first.poll() is not None
    assert server.process is None or server.process.poll() is not None
    assert not server.socket.exists()
    server.restart()  # a restart after the stop starts nothing
    assert not server.socket.exists()
