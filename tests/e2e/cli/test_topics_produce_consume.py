"""The CLI round trip against a real broker: topics admin, produce, consume."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from headwater.records import partition_for_key
from tests.support import ROOT, ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e


def headwater(
    broker: ServiceProcess, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "HEADWATER_BROKERS": broker.url}
    return subprocess.run(
        [sys.executable, "-m", "headwater_cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_topic_lifecycle(broker: ServiceProcess) -> None:
    topic = unique("cli")
    created = headwater(
        broker, "topics", "create", topic, "--partitions", "2", "--config", "retention.ms=3600000"
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.decode() == f"Created topic {topic} with 2 partition(s).\n"
    listed = headwater(broker, "topics", "list")
    assert topic in listed.stdout.decode().split()
    described = headwater(broker, "topics", "describe", topic).stdout.decode()
    assert described.startswith(f"Topic: {topic}\tPartitions: 2\n")
    assert "  retention.ms=3600000\n" in described
    again = headwater(broker, "topics", "create", topic)
    assert again.returncode == 1
    assert again.stderr.decode() == (
        f"headwater topics create: Topic '{topic}' already exists (error 40901)\n"
    )
    assert headwater(broker, "topics", "delete", topic).returncode == 0
    missing = headwater(broker, "topics", "describe", topic)
    assert missing.returncode == 1
    assert b"(error 40401)" in missing.stderr


def test_bad_config_flag_is_reported(broker: ServiceProcess) -> None:
    result = headwater(broker, "topics", "create", unique("cli"), "--config", "retention.ms")
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "headwater topics create: --config expects name=value, got 'retention.ms'\n"
    )


def test_keyed_produce_and_consume_round_trip(broker: ServiceProcess, tmp_path: Path) -> None:
    topic = unique("cli")
    assert headwater(broker, "topics", "create", topic, "--partitions", "3").returncode == 0
    lines = [f"user-{i % 7}:event {i}" for i in range(60)]
    source = tmp_path / "events.txt"
    source.write_text("\n".join(lines) + "\n")
    produced = headwater(
        broker,
        "produce",
        topic,
        "--file",
        str(source),
        "--key-separator",
        ":",
        "--compression",
        "zstd",
    )
    assert produced.returncode == 0, produced.stderr
    counts = dict.fromkeys(range(3), 0)
    for line in lines:
        counts[partition_for_key(line.split(":")[0].encode(), 3)] += 1
    spread = ", ".join(f"{p}: {n}" for p, n in counts.items() if n)
    summary = produced.stdout.decode()
    assert summary.startswith(f"Produced 60 record(s) to {topic} in ")
    assert summary.endswith(f"per partition {{{spread}}}\n")

    consumed = headwater(
        broker,
        "consume",
        topic,
        "--from-beginning",
        "--max-messages",
        "60",
        "--print-key",
        "--separator",
        ":",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.decode().splitlines()) == sorted(lines)
    # Progress lines ("... N records (R/s)") may come first on a slow machine; the summary is last.
    assert consumed.stderr.decode().splitlines()[-1] == "Processed a total of 60 messages"


def test_stdin_produce_and_partition_consume_with_offsets(broker: ServiceProcess) -> None:
    topic = unique("cli")
    assert headwater(broker, "topics", "create", topic).returncode == 0
    produced = headwater(broker, "produce", topic, stdin=b"first\nsecond\nthird")
    assert produced.returncode == 0, produced.stderr
    consumed = headwater(
        broker,
        "consume",
        topic,
        "--partition",
        "0",
        "--offset",
        "1",
        "--timeout",
        "1",
        "--print-offset",
    )
    assert consumed.stdout == b"0:1\tsecond\n0:2\tthird\n"
    latest = headwater(broker, "consume", topic, "--timeout", "0.5")
    assert (latest.returncode, latest.stdout) == (0, b"")


def test_line_without_separator_fails_clearly(broker: ServiceProcess) -> None:
    topic = unique("cli")
    assert headwater(broker, "topics", "create", topic).returncode == 0
    result = headwater(broker, "produce", topic, "--key-separator", "=", stdin=b"a=1\nnokey\n")
    assert result.returncode == 1
    assert result.stderr.decode() == "headwater produce: line 2 has no key separator '='\n"


def test_unreachable_broker_is_one_clear_line() -> None:
    env = {**os.environ, "HEADWATER_BROKERS": f"http://127.0.0.1:{free_port()}"}
    result = subprocess.run(
        [sys.executable, "-m", "headwater_cli", "topics", "list"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.decode().startswith("headwater topics list: cannot reach http://127.0.0.1")
