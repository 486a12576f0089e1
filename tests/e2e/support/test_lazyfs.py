"""The power-loss filesystem (tests/support/lazyfs.py) as its users rely on it: a crash keeps the
fsynced data of the names whose directory was fsynced, and nothing else, while reads before the
crash see everything written."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lazyfs import LazyMount

pytestmark = [pytest.mark.e2e, pytest.mark.needs("root", "fuse")]


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    with LazyMount(tmp_path / "disk", tmp_path / "mnt", tmp_path / "lazyfs.log") as mount:
        yield mount


def write(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Append ``data`` to ``path`` (created if missing), fsynced if ``sync``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, os.fstat(fd).st_size)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_file(path: Path, data: bytes) -> None:
    """A file with ``data`` that a crash keeps: its data and its directory fsynced."""
    write(path, data, sync=True)
    fsync_dir(path.parent)


def power_cycle(lazy: LazyMount) -> None:
    lazy.crash()
    lazy.mount()


def test_an_unsynced_write_is_read_back_but_gone_after_a_crash(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    durable_file(file, b"")
    write(file, b"not synced")
    assert file.read_bytes() == b"not synced"
    assert file.stat().st_size == 10
    assert (lazy.backing / "log").read_bytes() == b""
    power_cycle(lazy)
    assert file.read_bytes() == b""


def test_a_synced_write_survives_a_crash(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    durable_file(file, b"synced")
    power_cycle(lazy)
    assert file.read_bytes() == b"synced"


def test_a_new_name_survives_only_once_its_directory_is_fsynced(lazy: LazyMount) -> None:
    kept = lazy.mountpoint / "kept"
    kept.mkdir()
    fsync_dir(lazy.mountpoint)
    (kept / "dir").mkdir()
    durable_file(kept / "dir" / "file", b"data")  # durable in dir, but dir is not in kept
    write(kept / "file", b"data", sync=True)  # its data synced, its name not
    power_cycle(lazy)
    assert [p.name for p in lazy.mountpoint.iterdir()] == ["kept"]
    assert list(kept.iterdir()) == []
    assert "/kept/file was never made durable by a directory fsync" in lazy.log_tail()


def test_a_crash_keeps_what_was_synced_and_nothing_after(lazy: LazyMount) -> None:
    log, other = lazy.mountpoint / "log", lazy.mountpoint / "other"
    durable_file(log, b"first,")
    durable_file(other, b"")
    write(log, b"second,")
    write(other, b"other file")
    fd = os.open(other, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # syncs this file only: the log's second write stays cached
    finally:
        os.close(fd)
    write(log, b"third")
    assert log.read_bytes() == b"first,second,third"
    power_cycle(lazy)
    assert log.read_bytes() == b"first,"
    assert other.read_bytes() == b"other file"


def cut_and_write(path: Path, *, sync: bool) -> None:
    """Truncate "abcdef" to "ab", then write "XY" at 4: the bytes between read as zeros."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, 2)
        os.pwrite(fd, b"XY", 4)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_a_truncate_is_cached_like_a_write(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    durable_file(file, b"abcdef")
    cut_and_write(file, sync=False)
    assert file.read_bytes() == b"ab\0\0XY"
    power_cycle(lazy)
    assert file.read_bytes() == b"abcdef"
    cut_and_write(file, sync=True)
    power_cycle(lazy)
    assert file.read_bytes() == b"ab\0\0XY"


def test_replacing_a_file_keeps_what_was_synced_of_it(lazy: LazyMount) -> None:
    target, tmp = lazy.mountpoint / "checkpoint", lazy.mountpoint / "checkpoint.tmp"
    durable_file(target, b"old")
    write(tmp, b"new", sync=True)
    os.replace(tmp, target)
    fsync_dir(lazy.mountpoint)
    power_cycle(lazy)
    assert target.read_bytes() == b"new"
    # Without the new file's fsync the name survives, its data does not.
    write(tmp, b"newer")
    os.replace(tmp, target)
    fsync_dir(lazy.mountpoint)
    assert target.read_bytes() == b"newer"
    power_cycle(lazy)
    assert sorted(p.name for p in lazy.mountpoint.iterdir()) == ["checkpoint"]
    assert target.read_bytes() == b""
    # Without the directory's fsync the name the new file took is not durable: it goes.
    write(tmp, b"newest", sync=True)
    os.replace(tmp, target)
    power_cycle(lazy)
    assert list(lazy.mountpoint.iterdir()) == []


def test_an_unmount_drops_unsynced_data_too(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    durable_file(file, b"synced,")
    write(file, b"unsynced")
    lazy.unmount()
    lazy.mount()
    assert file.read_bytes() == b"synced,"
