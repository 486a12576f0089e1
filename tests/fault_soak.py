"""The replication fault tests again and again, with CPU hogs keeping every core busy (`make soak`).

A fault test that passes once on a quiet machine has proved little: the interleavings that lose
records or freeze a broker need a starved process or a slow commit. This runs the leader kill,
pause and cut-off, controller kill and partial-cut tests in rounds for a fixed budget
(``SOAK_SECONDS``, default 300) beside one busy-looping process per core, starts no round it
cannot finish within the budget (judged by the longest round so far), and fails on the first
failed test, printing its output. The hogs are bounded too: each stops by itself at the budget's
end plus a minute, whatever happens to this process.

Run: ``python -m tests.fault_soak`` (CI runs it after ``make test``).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/e2e/replication/test_leader_kill.py",
    "tests/e2e/replication/test_leader_paused.py",
    "tests/e2e/replication/test_leader_cut_off.py",
    "tests/e2e/replication/test_controller_faults.py",
    "tests/e2e/replication/test_partial_cuts.py",
]


def hog(until: float) -> None:
    """Busy-loop until ``until`` (wall clock): one core's worth of load, bounded."""
    while time.time() < until:
        for _ in range(100_000):
            pass


def main() -> int:
    budget = float(os.environ.get("SOAK_SECONDS", "300"))
    started = time.monotonic()
    hogs = [
        multiprocessing.Process(target=hog, args=(time.time() + budget + 60,), daemon=True)
        for _ in range(os.cpu_count() or 2)
    ]
    for process in hogs:
        process.start()
    rounds = runs = 0
    longest = 0.0
    try:
        while time.monotonic() - started + longest < budget or rounds == 0:
            began = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            rounds += 1
            runs += _passed(result.stdout)
            longest = max(longest, time.monotonic() - began)
            if result.returncode != 0:
                print(result.stdout[-20_000:], result.stderr[-5_000:], sep="\n")
                print(f"fault soak: round {rounds} failed", file=sys.stderr)
                return 1
            print(f"fault soak: round {rounds} passed in {time.monotonic() - began:.0f} s")
    finally:
        for process in hogs:
            process.terminate()
    spent = time.monotonic() - started
    print(
        f"fault soak: {rounds} rounds, {runs} fault-test runs, 0 failures in {spent:.0f} s "
        f"with {len(hogs)} CPU hogs"
    )
    return 0


def _passed(summary: str) -> int:
    """The number of passed tests in pytest's last summary line ("5 passed in 80.1s")."""
    for line in reversed(summary.splitlines()):
        words = line.replace(",", " ").split()
        if "passed" in words:
            return int(words[words.index("passed") - 1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
