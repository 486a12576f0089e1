"""The power-loss filesystem (tests/support/lazyfs.py) as a user of it relies on: what a crash
keeps is exactly what was fsynced, file by file, while reads before it see everything written."""

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


def write(path: Path, data: bytes, *, at: int | None = None, sync: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, os.fstat(fd).st_size if at is None else at)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def power_cycle(lazy: LazyMount) -> None:
    lazy.crash()
    lazy.mount()


def test_an_unsynced_write_is_read_back_but_gone_after_a_crash(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    write(file, b"not synced")
    assert file.read_bytes() == b"not synced"
    assert file.stat().st_size == 10
    assert (lazy.backing / "log").read_bytes() == b""
    power_cycle(lazy)
    # The name was created at once (the namespace is not cached); the data was not synced.
    assert file.read_bytes() == b""


def test_a_synced_write_survives_a_crash(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    write(file, b"synced", sync=True)
    power_cycle(lazy)
    assert file.read_bytes() == b"synced"


def test_a_crash_keeps_what_was_synced_and_nothing_after(lazy: LazyMount) -> None:
    log, other = lazy.mountpoint / "log", lazy.mountpoint / "other"
    write(log, b"first,", sync=True)
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
    write(file, b"abcdef", sync=True)
    cut_and_write(file, sync=False)
    assert file.read_bytes() == b"ab\0\0XY"
    power_cycle(lazy)
    assert file.read_bytes() == b"abcdef"
    cut_and_write(file, sync=True)
    power_cycle(lazy)
    assert file.read_bytes() == b"ab\0\0XY"


def test_rename_is_applied_at_once_and_carries_only_synced_data(lazy: LazyMount) -> None:
    target = lazy.mountpoint / "checkpoint"
    write(target, b"old", sync=True)
    tmp = lazy.mountpoint / "checkpoint.tmp"
    write(tmp, b"new", sync=True)
    os.replace(tmp, target)
    power_cycle(lazy)
    assert target.read_bytes() == b"new"
    # The same replace without the file's fsync: the rename survives, its data does not.
    write(tmp, b"newer")
    os.replace(tmp, target)
    assert target.read_bytes() == b"newer"
    power_cycle(lazy)
    assert sorted(p.name for p in lazy.mountpoint.iterdir()) == ["checkpoint"]
    assert target.read_bytes() == b""


def test_an_unmount_drops_unsynced_data_too(lazy: LazyMount) -> None:
    file = lazy.mountpoint / "log"
    write(file, b"synced,", sync=True)
    write(file, b"unsynced")
    lazy.unmount()
    lazy.mount()
    assert file.read_bytes() == b"synced,"
