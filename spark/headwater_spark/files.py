"""Small files the job keeps (the produced-range ledger, the summary) on any Hadoop path.

The driver of a cluster job may run in an ephemeral pod, so its state must live where the cluster
keeps data: ``s3a://``, ``hdfs://``, ``abfs://`` or ``file://`` (and plain local paths).
:class:`HadoopFiles` reaches them through the JVM's Hadoop FileSystem of the running Spark
session (driver only: it goes through py4j); :class:`LocalFiles` is the same contract on the
local file system, for code and tests that run without a JVM.

Atomic replacement is write-to-a-temporary-name-then-rename: atomic on HDFS and local disks;
on object stores (s3a) a rename is a copy, so a crash mid-write leaves the old file or the new one
plus a stray temporary file, never a torn ledger.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Protocol


class Files(Protocol):
    """The few file operations the job's driver needs."""

    def read_text(self, path: str) -> str | None:
        """The file's text, None when it does not exist."""

    def write_text(self, path: str, text: str) -> None:
        """Replace the file's content atomically (parents created)."""

    def join(self, base: str, *names: str) -> str: ...


class LocalFiles:
    """:class:`Files` on the local file system (``file://`` URLs accepted)."""

    @staticmethod
    def _local(path: str) -> Path:
        return Path(path.removeprefix("file://"))

    def read_text(self, path: str) -> str | None:
        local = self._local(path)
        return local.read_text() if local.exists() else None

    def write_text(self, path: str, text: str) -> None:
        local = self._local(path)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(text)
        os.replace(tmp, local)

    def join(self, base: str, *names: str) -> str:
        return "/".join([base.rstrip("/"), *names])


class HadoopFiles:
    """:class:`Files` through the Spark session's Hadoop FileSystem (driver only)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def fs(self, path: Any) -> Any:
        return path.getFileSystem(self._conf)

    def read_text(self, path: str) -> str | None:
        p = self.path(path)
        fs = self.fs(p)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode()

    def write_text(self, path: str, text: str) -> None:
        p = self.path(path)
        fs = self.fs(p)
        fs.mkdirs(p.getParent())
        tmp = self.path(f"{path}.{uuid.uuid4().hex}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise OSError(f"could not rename {tmp} to {path}")

    def join(self, base: str, *names: str) -> str:
        return "/".join([base.rstrip("/"), *names])

    def glob(self, pattern: str) -> list[str]:
        found = self.fs(self.path(pattern)).globStatus(self.path(pattern))
        return [] if found is None else [str(status.getPath().toString()) for status in found]

    def delete(self, path: str, recursive: bool = False) -> None:
        p = self.path(path)
        self.fs(p).delete(p, recursive)

    def rename(self, source: str, target: str) -> None:
        src, dst = self.path(source), self.path(target)
        fs = self.fs(src)
        fs.mkdirs(dst.getParent())
        if fs.exists(dst):
            fs.delete(dst, False)
        if not fs.rename(src, dst):
            raise OSError(f"could not rename {source} to {target}")
