"""``headwater validate`` as a new user runs it: expected failures are one line and exit 1.

A subject the registry does not have, or a registry that does not answer, fails before Spark
starts: these runs put a recording ``java`` first (as ``JAVA_HOME`` and on ``PATH``, the two places
Spark's launcher looks) and assert it was never called.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.spark.conftest import Platform
from tests.support import free_port

pytestmark = pytest.mark.spark


def validate(
    *args: str, prelude: str = "", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nimport sys\nfrom headwater_cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "validate", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


class JavaCalls:
    """A ``java`` that appends its arguments to a file, then runs the real one."""

    def __init__(self, root: Path) -> None:
        java_home = os.environ.get("JAVA_HOME")
        real = Path(java_home, "bin", "java") if java_home else Path(shutil.which("java") or "")
        assert real.is_file(), f"no java at {real}"
        self.home = root / "jdk"
        self.log = root / "java-calls.log"
        (self.home / "bin").mkdir(parents=True)
        launcher = self.home / "bin" / "java"
        launcher.write_text(f'#!/bin/sh\necho "$*" >> "{self.log}"\nexec "{real}" "$@"\n')
        launcher.chmod(0o755)

    def environment(self) -> dict[str, str]:
        path = f"{self.home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, "JAVA_HOME": str(self.home), "PATH": path}

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("headwater validate")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_without_the_spark_extra_it_says_how_to_install_it() -> None:
    # What `make up` installs: the server extra, not pyarrow. A None entry in sys.modules is how
    # Python itself marks a module as not importable.
    result = validate("orders", prelude="import sys; sys.modules['pyarrow'] = None")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "headwater validate: needs the spark extra (pyarrow not installed): pip install "
        "'headwater[spark]' (in a checkout: .venv/bin/pip install -e '.[spark]')"
    ]
    assert "Traceback" not in result.stderr


def test_the_recording_java_sees_a_spark_start(tmp_path: Path) -> None:
    """What makes the ``no java`` checks below mean something: the script PySpark starts its JVM
    with (``$SPARK_HOME/bin/spark-submit``, see ``pyspark.java_gateway``) runs the recording one."""
    from pyspark.find_spark_home import _find_spark_home

    java = JavaCalls(tmp_path)
    submit = Path(_find_spark_home(), "bin", "spark-submit")
    done = subprocess.run(
        [str(submit), "--version"],
        env={**java.environment(), "PYSPARK_DRIVER_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    calls = java.calls()
    assert len(calls) == 2, calls  # bin/spark-class's launcher, then SparkSubmit itself
    assert calls[-1].endswith("org.apache.spark.deploy.SparkSubmit --version"), calls


def test_an_unregistered_subject_fails_before_spark_starts(
    platform: Platform, tmp_path: Path
) -> None:
    topic = platform.create_topic("unregistered")
    platform.produce(topic, [b"\x00\x00\x00\x00\x01payload"])
    java = JavaCalls(tmp_path)
    result = validate(
        topic, "--brokers", platform.broker, "--registry", platform.registry, env=java.environment()
    )
    assert result.returncode == 1, result.stderr
    assert one_error_line(result) == (
        f"headwater validate: Subject '{topic}-value' not found. (error 40401)"
    )
    assert java.calls() == []


def test_an_unreachable_registry_fails_before_spark_starts(
    platform: Platform, tmp_path: Path
) -> None:
    topic = platform.create_topic("no-registry")
    nobody = f"http://127.0.0.1:{free_port()}"
    java = JavaCalls(tmp_path)
    result = validate(
        topic, "--brokers", platform.broker, "--registry", nobody, env=java.environment()
    )
    assert result.returncode == 1, result.stderr
    line = one_error_line(result)
    assert line.startswith(f"headwater validate: cannot reach {nobody}/subjects/{topic}-value/"), (
        line
    )
    assert java.calls() == []
