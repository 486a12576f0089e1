"""The CLI round trip against a real broker: topics admin, produce, consume."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
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
    # The admin client retries a refused connection until the request timeout: 2 s, not 30.
    env = {
        **os.environ,
        "HEADWATER_BROKERS": f"http://127.0.0.1:{free_port()}",
        "HEADWATER_REQUEST_TIMEOUT_MS": "2000",
    }
    result = subprocess.run(
        [sys.executable, "-m", "headwater_cli", "topics", "list"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.decode().startswith("headwater topics list: cannot reach http://127.0.0.1")


def test_alter_sets_and_deletes_configs_and_grows_partitions(broker: ServiceProcess) -> None:
    topic = unique("cli")
    created = headwater(broker, "topics", "create", topic, "--config", "segment.ms=60000")
    assert created.returncode == 0, created.stderr
    altered = headwater(
        broker,
        "topics",
        "alter",
        topic,
        "--config",
        "retention.ms=3600000",
        "--delete-config",
        "segment.ms",
        "--partitions",
        "3",
    )
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.decode() == (
        f"Altered topic {topic}:\n"
        "  retention.ms=3600000 (was 604800000)\n"
        "  segment.ms=604800000 (was 60000)\n"
        "  partitions=3 (was 1)\n"
    )
    described = headwater(broker, "topics", "describe", topic).stdout.decode()
    assert described.startswith(f"Topic: {topic}\tPartitions: 3\n")
    assert "  retention.ms=3600000\n" in described
    same = headwater(broker, "topics", "alter", topic, "--config", "retention.ms=3600000")
    assert same.stdout.decode() == f"Topic {topic} unchanged.\n"
    refused = headwater(broker, "topics", "alter", topic, "--config", "retention.ms=-7")
    assert (refused.returncode, refused.stderr.decode()) == (
        1,
        "headwater topics alter: Invalid value -7 for config 'retention.ms': must be at least -1 "
        "(error 42202)\n",
    )
    nothing = headwater(broker, "topics", "alter", topic)
    assert (nothing.returncode, nothing.stderr.decode()) == (
        1,
        "headwater topics alter: nothing to alter: give --partitions, --config or "
        "--delete-config\n",
    )


def test_version_flag() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "headwater_cli", "--version"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, b"headwater 0.1.0\n")


def test_a_broker_url_that_reaches_another_service_says_so(
    broker: ServiceProcess, tmp_path: Path
) -> None:
    port = free_port()
    env = {"REGISTRY_PORT": str(port), "REGISTRY_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}"}
    with ServiceProcess("headwater_registry", port, env, log_path=tmp_path / "r.log") as registry:
        # The user's mistake: the registry's port where the broker's belongs. Its answers are
        # retried until the request timeout (then the URL is checked): 5 s, not 30.
        listed = headwater(registry, "topics", "list", "--request-timeout-ms", "5000")
        assert listed.returncode == 1
        assert listed.stderr.decode() == (
            f"headwater topics list: {registry.url} is not a Headwater broker: it is a Headwater "
            f"schema registry (pid {registry.pid}). The broker listens on http://127.0.0.1:8082 "
            "by default; give --bootstrap-server or set $HEADWATER_BROKERS\n"
        )
    groups = headwater(broker, "groups", "list", "--coordinator", broker.url)
    assert groups.stderr.decode() == (
        f"headwater groups list: {broker.url} is not a Headwater coordinator: it is a Headwater "
        f"broker (pid {broker.pid}). The coordinator listens on http://127.0.0.1:8090 by "
        "default; give --coordinator or set $HEADWATER_COORDINATOR\n"
    )


def test_a_broker_url_that_reaches_no_headwater_service_says_so(tmp_path: Path) -> None:
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.1)
        # Its 404s are retried until the request timeout (then the URL is checked): 5 s, not 30.
        env = {**os.environ, "HEADWATER_BROKERS": url, "HEADWATER_REQUEST_TIMEOUT_MS": "5000"}
        result = subprocess.run(
            [sys.executable, "-m", "headwater_cli", "topics", "describe", "orders"],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 1
        assert result.stderr.decode() == (
            f"headwater topics describe: {url} is not a Headwater broker: it is a program that is "
            "not a Headwater service. The broker listens on http://127.0.0.1:8082 by default; "
            "give --bootstrap-server or set $HEADWATER_BROKERS\n"
        )
    finally:
        web.terminate()
        web.wait(timeout=10)


def test_a_reader_that_stops_early_ends_the_command_quietly(broker: ServiceProcess) -> None:
    topic = unique("cli-pipe")
    assert headwater(broker, "topics", "create", topic).returncode == 0
    env = {**os.environ, "HEADWATER_BROKERS": broker.url}
    # `headwater topics describe T | head -0`: the reader is gone before the first line.
    read, write = os.pipe()
    os.close(read)
    with subprocess.Popen(
        [sys.executable, "-m", "headwater_cli", "topics", "describe", topic],
        stdout=write,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    ) as process:
        os.close(write)
        _, stderr = process.communicate(timeout=60)
    assert stderr == b""  # no traceback, no "Exception ignored" at exit
    assert process.returncode == 141  # 128 + SIGPIPE, as a shell reports `... | head`
