"""A data directory has one owner at a time; a refused process learns who, even after a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from headwater_kernel.directory_lock import DirectoryInUseError, DirectoryLock, read_note


def test_a_second_lock_is_refused_with_the_first_owners_note(tmp_path: Path) -> None:
    with DirectoryLock(tmp_path / "data").acquire({"services": {"broker-0": "http://b"}}) as lock:
        with pytest.raises(DirectoryInUseError) as refused:
            DirectoryLock(tmp_path / "data").acquire({})
        assert refused.value.holder["pid"] == os.getpid()
        assert refused.value.holder["services"] == {"broker-0": "http://b"}
        lock.update({"pids": {"broker-0": 42}})
        assert read_note(tmp_path / "data" / ".lock")["pids"] == {"broker-0": 42}
    with DirectoryLock(tmp_path / "data").acquire({"again": True}):
        assert read_note(tmp_path / "data" / ".lock")["again"] is True


# An owner that passes the lock to a child, then dies without releasing it (as a SIGKILLed
# `headwater up` whose services live on).
OWNER = textwrap.dedent(
    """
    import os, subprocess, sys
    from pathlib import Path
    from headwater_kernel.directory_lock import DirectoryLock
    lock = DirectoryLock(Path(sys.argv[1])).acquire({"who": "owner"})
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(lock.fileno(),),
    )
    print(child.pid, flush=True)
    os._exit(0)
    """
)


def test_children_holding_the_descriptor_keep_the_directory(tmp_path: Path) -> None:
    owner = subprocess.run(
        [sys.executable, "-c", OWNER, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    child = int(owner.stdout)
    try:
        with pytest.raises(DirectoryInUseError) as refused:
            DirectoryLock(tmp_path).acquire({})
        assert refused.value.holder["who"] == "owner"
    finally:
        os.kill(child, signal.SIGKILL)  # an orphan: init reaps it, the kernel drops its lock
    deadline = time.monotonic() + 10
    while True:
        try:
            DirectoryLock(tmp_path).acquire({}).release()
            break
        except DirectoryInUseError:
            assert time.monotonic() < deadline, "the lock outlived its last holder"
            time.sleep(0.05)
