"""``headwater validate`` as a new user runs it: expected failures are one line and exit 1."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.spark.conftest import Platform

pytestmark = pytest.mark.spark


def validate(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nimport sys\nfrom headwater_cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "validate", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


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


def test_a_topic_without_a_registered_schema_is_one_line(platform: Platform) -> None:
    topic = platform.create_topic("unregistered")
    platform.produce(topic, [b"\x00\x00\x00\x00\x01payload"])
    result = validate(topic, "--brokers", platform.broker, "--registry", platform.registry)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("headwater validate")]
    assert len(lines) == 1, result.stderr
    assert f"Subject '{topic}-value' not found" in lines[0]
