"""`make demo` as a user runs it: the platform starts, every broken record is sorted, all stops."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.spark


def test_demo_reports_every_kind_of_broken_record_and_stops_what_it_started() -> None:
    demo = subprocess.run(
        [sys.executable, "-m", "headwater_spark.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    match = re.search(r"^summary JSON: (\S+)$", demo.stdout, re.M)
    assert match, demo.stdout[-3000:]
    with open(match.group(1)) as f:
        summary = json.load(f)
    assert summary["records"] == 50
    assert summary["outcomes"] == {"valid": 40, "invalid": 10}
    assert summary["reasons"] == {
        "BAD_FRAMING": 2,
        "UNKNOWN_SCHEMA_ID": 2,
        "DECODE_ERROR": 2,
        "INVALID_RECORD": 2,
        "INCOMPATIBLE_SCHEMA": 2,
    }
    assert "== a few dead letters from orders-dlq:" in demo.stdout
    assert demo.stdout.rstrip().endswith("== stopping the platform")
