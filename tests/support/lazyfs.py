"""A FUSE filesystem that loses unsynced writes: power loss for tests (in the spirit of LazyFS).

``python -m tests.support.lazyfs BACKING MOUNTPOINT`` serves the directory BACKING at MOUNTPOINT
until unmounted. ``LazyMount`` runs it from a test and cuts its power.

What a crash keeps -- the contract the power-loss tests rely on:

- **File data is cached.** ``write`` and ``truncate`` (``O_TRUNC`` included) of a regular file go
  to this process's memory, per file, as a machine's page cache: reads and ``stat`` through the
  mount see them, the backing file does not. Only ``fsync`` / ``fdatasync`` of that file (or a
  write through an ``O_SYNC`` / ``O_DSYNC`` descriptor) writes its cached data to the backing
  file. Closing the file does not, and neither does unmounting: cached data lives in this process
  and dies with it, however it exits.
- **New names wait for their directory's fsync.** A name made by ``create`` or ``mkdir`` (or a
  rename of such a name) vanishes in a crash, with everything under it, unless the directory
  holding it was fsynced after; its file's fsynced data goes with it. Names are recorded in
  ``NewNames``, whose journal beside BACKING survives this process, and the next mount removes
  them from BACKING before serving it.
- **Other namespace changes are applied at once.** ``unlink``, ``rmdir``, a ``rename`` of a name
  that has reached the disk, ``chmod``, ``chown`` and ``utimens`` reach BACKING when made and
  survive a crash without a directory fsync. A real disk may undo them; that is not modelled
  (a rename over a synced name can come back as the old file there, here the new name is simply
  there or, if it was new, gone).
- **The crash** is ``kill -9`` of this process, then an unmount (``LazyMount.crash``). Mounted
  again, BACKING holds exactly the fsynced data of the names whose directory was fsynced.

The backing files are written, not fsynced: the machine running the tests keeps its power.
Every operation holds one lock; this is for correctness tests, not for speed.
"""

from __future__ import annotations

import argparse
import collections
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self

from headwater.closeable import Closeable
from tests.support import ROOT


@dataclass
class Cached:
    """The unsynced state of one file: what its readers see that the backing file lacks."""

    size: int  # the file's size as readers see it
    kept: int  # bytes of the backing file still part of it (a truncate below hides the rest)
    writes: list[tuple[int, bytearray]] = field(default_factory=list)  # later ones win

    def read(self, fd: int, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        out = bytearray(end - offset)  # past the backing file and every write: zeros
        if offset < min(end, self.kept):
            old = os.pread(fd, min(end, self.kept) - offset, offset)
            out[: len(old)] = old
        for at, data in self.writes:
            lo, hi = max(at, offset), min(at + len(data), end)
            if lo < hi:
                out[lo - offset : hi - offset] = data[lo - at : hi - at]
        return bytes(out)

    def write(self, data: bytes, offset: int) -> None:
        last = self.writes[-1] if self.writes else None
        if last is not None and last[0] + len(last[1]) == offset:
            last[1].extend(data)  # an append to the previous write: one extent, not thousands
        else:
            self.writes.append((offset, bytearray(data)))
        self.size = max(self.size, offset + len(data))

    def truncate(self, length: int) -> None:
        self.size = length
        self.kept = min(self.kept, length)
        self.writes = [(at, data[: length - at]) for at, data in self.writes if at < length]

    def sync(self, fd: int) -> None:
        """Write this state to the backing file ``fd``."""
        os.ftruncate(fd, self.kept)
        for at, data in self.writes:
            done = 0
            while done < len(data):  # pwrite may write less than asked
                done += os.pwrite(fd, memoryview(data)[done:], at + done)
        os.ftruncate(fd, self.size)


_STAT_FIELDS = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_rdev")
_SYNC_FLAGS = os.O_SYNC | os.O_DSYNC


class LazyFS:
    """The FUSE operations (mfusepy's high-level interface): a passthrough to ``backing``
    whose file data waits in memory for an fsync. Paths arrive relative to the mount root;
    ``fh`` is the backing file's descriptor, always opened read-write so an fsync can write."""

    use_ns = True  # times as integer nanoseconds

    def __init__(self, backing: Path) -> None:
        self.backing = backing
        self.new_names = NewNames(journal_of(backing))
        self._lock = threading.Lock()
        self._cached: dict[int, Cached] = {}  # by backing inode: renames keep a file's cache
        self._opened: collections.Counter[int] = collections.Counter()  # open handles by inode
        self._sync_writes: set[int] = set()  # handles opened with O_SYNC or O_DSYNC

    def _full(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    def _cache_of(self, st: os.stat_result) -> Cached:
        cached = self._cached.get(st.st_ino)
        if cached is None:
            cached = self._cached[st.st_ino] = Cached(st.st_size, st.st_size)
        return cached

    def _forget(self, st: os.stat_result | None) -> None:
        """Drop the cache of a file whose last name was just removed, unless it is still open
        (``release`` drops it then): its inode number may be reused by the next new file."""
        if st is not None and st.st_nlink <= 1 and not self._opened[st.st_ino]:
            self._cached.pop(st.st_ino, None)

    # --- files -------------------------------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self._lock:
            if path is None:  # an open file whose name is gone
                if fh is None:
                    raise OSError(errno.EBADF, "neither a path nor a handle")
                st = os.fstat(fh)
            else:
                st = os.lstat(self._full(path))
            attrs: dict[str, Any] = {name: getattr(st, name) for name in _STAT_FIELDS}
            attrs |= {"st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns}
            attrs["st_ctime"] = st.st_ctime_ns
            cached = self._cached.get(st.st_ino) if stat.S_ISREG(st.st_mode) else None
            if cached is not None:
                attrs["st_size"] = cached.size
                attrs["st_blocks"] = (cached.size + 511) // 512
            return attrs

    def _opened_fd(self, fd: int, flags: int) -> int:
        st = os.fstat(fd)
        self._opened[st.st_ino] += 1
        if flags & _SYNC_FLAGS:
            self._sync_writes.add(fd)
        if flags & os.O_TRUNC:
            self._cache_of(st).truncate(0)
        return fd

    def open(self, path: str, flags: int) -> int:
        with self._lock:
            return self._opened_fd(os.open(self._full(path), os.O_RDWR), flags)

    def create(self, path: str, mode: int, flags: int) -> int:
        with self._lock:
            try:
                fd = os.open(self._full(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
                self.new_names.add(path)
            except FileExistsError:
                if flags & os.O_EXCL:
                    raise
                fd = os.open(self._full(path), os.O_RDWR)  # someone else created it meanwhile
            return self._opened_fd(fd, flags)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._lock:
            cached = self._cached.get(os.fstat(fh).st_ino)
            if cached is None:
                return os.pread(fh, size, offset)
            return cached.read(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._lock:
            cached = self._cache_of(os.fstat(fh))
            cached.write(data, offset)
            if fh in self._sync_writes:
                self._sync(fh)
            return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        with self._lock:
            self._cache_of(os.stat(self._full(path))).truncate(length)

    def fsync(self, path: str | None, datasync: int, fh: int) -> None:
        with self._lock:
            self._sync(fh)

    def _sync(self, fd: int) -> None:
        ino = os.fstat(fd).st_ino
        cached = self._cached.get(ino)
        if cached is not None:
            cached.sync(fd)
            del self._cached[ino]  # the backing file now holds exactly what readers see

    def flush(self, path: str | None, fh: int) -> None:
        """``close`` of one descriptor: persists nothing, as on a real machine."""

    def release(self, path: str | None, fh: int) -> None:
        with self._lock:
            st = os.fstat(fh)
            self._opened[st.st_ino] -= 1
            if not self._opened[st.st_ino]:
                del self._opened[st.st_ino]
                if st.st_nlink == 0:
                    self._cached.pop(st.st_ino, None)
            self._sync_writes.discard(fh)
            os.close(fh)

    # --- the namespace: applied to the backing directory at once, new names journaled --------

    def readdir(self, path: str, fh: int) -> list[str]:
        with self._lock:
            return [".", "..", *os.listdir(self._full(path))]

    def mkdir(self, path: str, mode: int) -> None:
        with self._lock:
            os.mkdir(self._full(path), mode)
            self.new_names.add(path)

    def rmdir(self, path: str) -> None:
        with self._lock:
            os.rmdir(self._full(path))
            self.new_names.remove(path)

    def unlink(self, path: str) -> None:
        with self._lock:
            st = os.lstat(self._full(path))
            os.unlink(self._full(path))
            self._forget(st)
            self.new_names.remove(path)

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            try:
                replaced: os.stat_result | None = os.lstat(self._full(new))
            except FileNotFoundError:
                replaced = None
            os.rename(self._full(old), self._full(new))
            if replaced is not None and replaced.st_ino != os.lstat(self._full(new)).st_ino:
                self._forget(replaced)
            self.new_names.rename(old, new)

    def chmod(self, path: str, mode: int) -> None:
        with self._lock:
            os.chmod(self._full(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        with self._lock:
            os.chown(self._full(path), uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        with self._lock:
            if times is None:
                os.utime(self._full(path))
            else:
                os.utime(self._full(path), ns=times)

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> None:
        """The names in ``path`` reach the disk (they are in BACKING already)."""
        if path is not None:
            with self._lock:
                self.new_names.synced(path)

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._full(path))
        names = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree")
        return {name: getattr(sv, name) for name in (*names, "f_favail", "f_flag", "f_namemax")}


def journal_of(backing: Path) -> Path:
    """Where the names not yet on the disk of ``backing`` are listed: beside it, not in it."""
    return backing.with_name(backing.name + ".new-names")


class NewNames:
    """Names created since the last fsync of their directory, which a crash removes.

    Paths are the mount's (``/topic-0/00000000000000000000.log``). The set is rewritten to the
    journal on every change, so it outlives a kill -9 of the filesystem; ``recover`` applies it.
    """

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.names: set[str] = set()

    def add(self, path: str) -> None:
        self.names.add(path)
        self._save()

    def remove(self, path: str) -> None:
        self._replace({p for p in self.names if _under(p, path)}, set())

    def rename(self, old: str, new: str) -> None:
        """Names at or under ``old`` are still new as ``new``; a renamed synced name is not."""
        moved = {p for p in self.names if _under(p, old)}
        gone = {p for p in self.names if _under(p, new)}
        self._replace(moved | gone, {new + p[len(old) :] for p in moved})

    def synced(self, directory: str) -> None:
        self._replace({p for p in self.names if os.path.dirname(p) == directory}, set())

    def _replace(self, drop: set[str], add: set[str]) -> None:
        if drop or add:
            self.names = (self.names - drop) | add
            self._save()

    def _save(self) -> None:
        # The test machine keeps its power: a rename is enough to never read a torn journal.
        tmp = self.journal.with_name(self.journal.name + ".tmp")
        tmp.write_text("".join(f"{name}\n" for name in sorted(self.names)))
        os.replace(tmp, self.journal)

    @staticmethod
    def recover(backing: Path) -> list[str]:
        """Remove from ``backing`` the names its last mount had not made durable; return them."""
        journal = journal_of(backing)
        try:
            names = journal.read_text().split()
        except FileNotFoundError:
            return []
        for name in sorted(names, key=lambda n: n.count("/"), reverse=True):
            path = backing / name.lstrip("/")
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        journal.unlink()
        return names


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def unmount(mountpoint: Path) -> None:
    """Detach ``mountpoint`` (lazily: a descriptor a dead process left does not hold it)."""
    subprocess.run(
        ["fusermount3", "-u", "-z", "-q", str(mountpoint)],
        check=False,
        timeout=30,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class LazyMount(Closeable, opens_with="mount", closes_with="unmount"):
    """A LazyFS process serving ``backing`` at ``mountpoint``, started by :meth:`mount`.

    :meth:`crash` cuts the power: the process is killed (its unsynced data with it) and the
    mountpoint detached, after which ``backing`` holds exactly what was fsynced; :meth:`mount`
    again serves that. :meth:`unmount` (also on leaving a ``with`` block) detaches it and lets
    the process exit; unsynced data is lost that way too.
    """

    def __init__(self, backing: Path, mountpoint: Path, log_path: Path | None = None) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def mount(self, timeout: float = 20.0) -> Self:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"{self.mountpoint} is mounted already")
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        log: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path:
            log = open(self.log_path, "ab")  # noqa: SIM115  # closed below, once the child has it
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.lazyfs", self.backing, self.mountpoint],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            if not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"lazyfs exited with {self.process.returncode}{self.log_tail()}")
            if os.path.ismount(self.mountpoint):
                return self
            time.sleep(0.05)
        self.crash()
        raise RuntimeError(f"lazyfs did not mount {self.mountpoint} in {timeout}s{self.log_tail()}")

    def crash(self) -> None:
        """Power loss: kill -9 the process, then detach the mountpoint."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        unmount(self.mountpoint)

    def unmount(self) -> None:
        unmount(self.mountpoint)
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.crash()

    def log_tail(self) -> str:
        if self.log_path and self.log_path.exists():
            return "\n" + self.log_path.read_text(errors="replace")[-3000:]
        return ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")  # not libfuse 2 where both are installed
    # Here, not at the top: importing it loads libfuse, which the tests' own process may lack.
    import mfusepy  # type: ignore[import-untyped]  # ctypes bindings without type information

    for name in NewNames.recover(args.backing):
        print(f"lazyfs: {name} was never made durable by a directory fsync: removed", flush=True)
    mfusepy.FUSE(
        LazyFS(args.backing.resolve()),
        str(args.mountpoint),
        foreground=True,
        # Unlink an open file for real rather than renaming it to .fuse_hidden*: the directory
        # must look as it would on a disk, and a crash must not leave such names behind.
        hard_remove=True,
        fsname="lazyfs",
    )


if __name__ == "__main__":
    try:
        main()
    except OSError as exc:
        sys.exit(f"lazyfs: {exc}")
