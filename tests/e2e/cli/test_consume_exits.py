"""How ``headwater consume`` ends: exit codes, the final count, leaving the group, progress.

Real broker and coordinator processes; each consumer is a ``headwater consume`` process, stopped
the ways a user stops one (a typo, a coordinator that is not there, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from headwater import AdminClient, Producer
from headwater.groups.client import CoordinatorClient
from headwater.groups.errors import GroupNotFoundError
from tests.e2e.groups_platform import Platform as GroupsPlatform
from tests.e2e.groups_platform import start_platform
from tests.support import ROOT, free_port, unique
from tests.support.waiting import wait_until

# The coordinator process uses the machine's Redis.
pytestmark = [pytest.mark.e2e, pytest.mark.needs("redis")]


@dataclass
class Platform(GroupsPlatform):
    tmp: Path

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HEADWATER_BROKERS": self.broker.url,
            "HEADWATER_COORDINATOR": self.coordinator.url,
        }

    def topic(self, records: int = 0) -> str:
        topic = unique("orders")
        with AdminClient({"bootstrap.servers": self.broker.url}) as admin:
            admin.create_topic(topic, 2)
        self.produce(topic, records)
        return topic

    def produce(self, topic: str, count: int) -> None:
        with Producer({"bootstrap.servers": self.broker.url}) as producer:
            for i in range(count):
                producer.produce(topic, b"v%d" % i, partition=i % 2)
            assert producer.flush(30) == 0

    def members(self, group: str) -> int:
        with CoordinatorClient(self.coordinator.url) as client:
            try:
                return len(client.describe(group)["members"])
            except GroupNotFoundError:
                return 0


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp("consume")
    # The default session timeout (45 s): a member that does not leave stays listed that long.
    with start_platform(tmp, "hwtest") as started:
        yield Platform(started.broker, started.coordinator, tmp)


def consume(platform: Platform, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "headwater_cli", "consume", *args],
        capture_output=True,
        text=True,
        env=platform.env(),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


@dataclass
class Running:
    """A ``headwater consume`` process with its stdout and stderr in files."""

    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def errors(self) -> list[str]:
        return self.err.read_text().splitlines()


def start(platform: Platform, *args: str) -> Running:
    name = unique("consume")
    out, err = platform.tmp / f"{name}.out", platform.tmp / f"{name}.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "headwater_cli", "consume", *args],
            stdout=stdout,
            stderr=stderr,
            env=platform.env(),
            cwd=ROOT,
            # As at a terminal: Ctrl-C raises KeyboardInterrupt even when this suite runs as a
            # background job (which starts its children with SIGINT ignored).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    return Running(process, out, err)


def test_a_misspelt_topic_with_a_group_fails_and_leaves_no_group(platform: Platform) -> None:
    group = unique("g3")
    result = consume(platform, unique("ordres"), "--group", group, "--timeout", "3")
    assert result.returncode == 1
    prefix = "headwater consume: Topic not found. There is no topic 'ordres-"
    assert result.stderr.startswith(prefix)
    assert result.stderr.endswith("'. (error 40401)\n")
    assert result.stderr.count("\n") == 1
    with CoordinatorClient(platform.coordinator.url) as client:
        assert group not in [g["group_id"] for g in client.list_groups()]
        with pytest.raises(GroupNotFoundError):
            client.describe(group)


def test_an_unreachable_coordinator_fails_before_the_timeout(platform: Platform) -> None:
    topic = platform.topic()
    nowhere = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = consume(
        platform, topic, "--group", unique("g"), "--timeout", "30", "--coordinator", nowhere
    )
    assert time.monotonic() - started < 25  # it did not retry until --timeout ran out
    assert (result.returncode, result.stderr) == (
        1,
        f"headwater consume: cannot reach the coordinator at {nowhere}; is it running? "
        "(give --coordinator or set $HEADWATER_COORDINATOR)\n",
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_stopped_member_leaves_at_once_and_prints_its_count(
    platform: Platform, stop: signal.Signals
) -> None:
    topic, group = platform.topic(records=7), unique("g")
    running = start(platform, topic, "--group", group, "--from-beginning")
    try:
        wait_until(lambda: len(running.lines()) == 7, what="7 records printed")
        assert platform.members(group) == 1
        running.process.send_signal(stop)
        assert running.process.wait(timeout=30) == 0
    finally:
        if running.process.poll() is None:
            running.process.kill()
    assert running.errors()[-1] == "Processed a total of 7 messages"
    # Left the group on the way out: no 45 s session timeout holding its partitions.
    assert platform.members(group) == 0


def test_the_progress_line_catches_up_with_what_was_printed(platform: Platform) -> None:
    topic, group = platform.topic(), unique("g")
    running = start(platform, topic, "--group", group, "--from-beginning")
    try:
        wait_until(lambda: platform.members(group) == 1, what="the member joined")
        time.sleep(1.2)  # past the first progress interval
        platform.produce(topic, 12)
        wait_until(
            lambda: "... 12 records" in running.err.read_text(), what="a progress line at 12"
        )
        platform.produce(topic, 15)  # within a second of that progress line
        wait_until(lambda: len(running.lines()) == 27, what="27 records printed")
        # Nothing more arrives; the last progress line still has to say 27, not 12.
        wait_until(
            lambda: [e for e in running.errors() if e.startswith("...")][-1].startswith(
                "... 27 records"
            ),
            timeout_s=5,
            what="a progress line at 27",
        )
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=30) == 0
    finally:
        if running.process.poll() is None:
            running.process.kill()
    assert running.errors()[-1] == "Processed a total of 27 messages"
