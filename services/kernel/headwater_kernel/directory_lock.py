"""``DirectoryLock``: one owner at a time for a data directory, and a note saying who it is.

The lock is ``flock(2)`` on ``<directory>/.lock``, so the kernel releases it when its last holder
exits, however it exits: no stale lock survives a crash. The owner writes a JSON note into the
same file (its pid, when it started, what it runs where) that a refused process reads to name it.

``flock`` belongs to the open file, not the process: children that inherit the descriptor
(``ServiceProcess(..., pass_fds=(lock.fileno(),))``) hold the lock with their parent. So services
that outlive a killed ``headwater up`` still keep a second one off their directory.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Self

import orjson

from headwater.closeable import Closeable

LOCK_FILE = ".lock"


class DirectoryInUseError(Exception):
    """Another process holds the directory; ``holder`` is its note (empty if unreadable)."""

    def __init__(self, directory: Path, holder: dict[str, Any]) -> None:
        self.directory = directory
        self.holder = holder
        pid = holder.get("pid", "?")
        super().__init__(f"{directory} is in use by process {pid}")


class DirectoryLock(Closeable, closes_with="release"):
    """An exclusive, non-blocking lock on ``directory`` held from :meth:`acquire` to
    :meth:`release` (or to the exit of the last process holding its descriptor)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self._file: IO[bytes] | None = None

    def acquire(self, note: Mapping[str, Any]) -> Self:
        """Take the lock and write ``note`` (plus pid and start time) for whoever is refused.

        Raises :class:`DirectoryInUseError` with the holder's note when another process has it.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        # "a+b" creates the file without truncating it: the holder's note must stay readable.
        file = open(self.path, "a+b")  # noqa: SIM115  # kept open while the lock is held
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            raise DirectoryInUseError(self.directory, read_note(self.path)) from None
        self._file = file
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        self.update({"pid": os.getpid(), "started": started, **note})
        return self

    def update(self, note: Mapping[str, Any]) -> None:
        """Replace the note (e.g. once the services' pids are known)."""
        if self._file is None:
            raise RuntimeError("update() needs the lock")
        current = read_note(self.path)
        self._file.seek(0)
        self._file.truncate()
        self._file.write(orjson.dumps({**current, **note}, option=orjson.OPT_INDENT_2))
        self._file.flush()

    def fileno(self) -> int:
        """The locked descriptor, for children that must hold the lock too."""
        if self._file is None:
            raise RuntimeError("fileno() needs the lock")
        return self._file.fileno()

    def release(self) -> None:
        """Give the lock up (for this process and every child still holding the descriptor)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def read_note(path: Path) -> dict[str, Any]:
    """The note in a lock file; empty when it is missing or half written."""
    try:
        note = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return note if isinstance(note, dict) else {}
