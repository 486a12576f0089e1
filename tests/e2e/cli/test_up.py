"""`headwater up` (what `make up` runs): services start on embedded defaults, stop on Ctrl-C, and
a second instance refuses to start beside a running one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from headwater_kernel.api_docs import ASSETS
from tests.support import ROOT, port_offset_with_free_ports, unique

pytestmark = pytest.mark.e2e


def urls(offset: int) -> tuple[str, str, str]:
    registry, broker, coordinator = (f"http://127.0.0.1:{p + offset}" for p in (8081, 8082, 8090))
    return registry, broker, coordinator


def start_up(data_dir: Path, offset: int, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "REGISTRY_"))}
    env.pop("COORDINATOR_REDIS_URL", None)  # embedded defaults: the private Redis
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "headwater_cli",
            "up",
            "--data-dir",
            str(data_dir),
            "--port-offset",
            str(offset),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_until_up(up: subprocess.Popen[str]) -> str:
    """Everything ``up`` printed until "Headwater is up"."""
    lines: list[str] = []
    assert up.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = up.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Headwater is up" in line:
            break
    output = "".join(lines)
    assert "Headwater is up" in output, output[-3000:]
    return output


def stop(up: subprocess.Popen[str], how: signal.Signals = signal.SIGTERM) -> None:
    if up.poll() is None:
        up.send_signal(how)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
    if up.stdout is not None:
        up.stdout.close()


def heartbeat(coordinator: str, topic: str) -> httpx.Response:
    return httpx.post(
        f"{coordinator}/groups/{unique('g')}/heartbeat",
        json={"member_epoch": 0, "topics": [topic]},
    )


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_serves_every_service_then_stops_them_all(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    offset = port_offset_with_free_ports()
    registry, broker, coordinator = urls(offset)
    up = start_up(tmp_path, offset)
    try:
        output = wait_until_up(up)
        for url in (registry, broker, coordinator):
            assert url in output
        # The variables that aim every command at these ports, ready to paste.
        assert (
            "Point the CLI at these ports (in another shell):\n"
            f"  export HEADWATER_BROKERS={broker}\n"
            f"  export HEADWATER_REGISTRY_URL={registry}\n"
            f"  export HEADWATER_COORDINATOR={coordinator}\n"
            "Headwater is up. Press Ctrl-C to stop.\n"
        ) in output

        topic = unique("up")
        created = httpx.post(f"{broker}/topics", json={"name": topic, "partitions": 2})
        assert created.status_code == 201, created.text
        produced = httpx.post(
            f"{broker}/topics/{topic}/partitions/1",
            json={"records": [{"value": {"n": 1}}, {"value": {"n": 2}}]},
            headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        )
        assert [o["offset"] for o in produced.json()["offsets"]] == [0, 1]
        schema = '{"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}'
        registered = httpx.post(
            f"{registry}/subjects/{topic}-value/versions",
            json={"schema": schema},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        assert registered.status_code == 200, registered.text
        beat = heartbeat(coordinator, topic)
        assert beat.status_code == 200, beat.text
        assert (tmp_path / "registry.db").exists()
        assert (tmp_path / "broker-0" / f"{topic}-1").is_dir()
        for url in (registry, broker, coordinator):
            # The docs pages load their assets from the service: no internet needed.
            assert httpx.get(f"{url}/docs").status_code == 200
            for name in ASSETS:
                assert httpx.get(f"{url}/docs/assets/{name}").status_code == 200

        up.send_signal(stop_signal)
        assert up.wait(timeout=60) == 0
        for url in (registry, broker, coordinator):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/healthz", timeout=1)
    finally:
        stop(up, signal.SIGKILL)


def test_a_second_up_refuses_and_the_first_keeps_serving(tmp_path: Path) -> None:
    offset = port_offset_with_free_ports()
    registry, broker, coordinator = urls(offset)
    first = start_up(tmp_path / "data", offset)
    try:
        wait_until_up(first)
        topic = unique("kept")
        assert httpx.post(f"{broker}/topics", json={"name": topic}).status_code == 201
        socket_file = tmp_path / "data" / "coordinator" / "redis.sock"
        assert socket_file.exists()

        # The same data directory, other ports: refused before anything starts.
        other = port_offset_with_free_ports()
        second = start_up(tmp_path / "data", other)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 1, out
        note = orjson.loads((tmp_path / "data" / ".lock").read_bytes())
        pids = note["pids"]
        assert out == (
            f"headwater up: data directory {tmp_path / 'data'} is in use by another headwater up "
            f"(pid {first.pid}, started {note['started']}): "
            f"registry {registry} (pid {pids['registry']}), "
            f"broker-0 {broker} (pid {pids['broker-0']}), "
            f"coordinator {coordinator} (pid {pids['coordinator']}). "
            f"Stop it first (Ctrl-C in its terminal, or kill {first.pid}), or give this one "
            "another --data-dir\n"
        )
        for url in urls(other):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/healthz", timeout=1)

        # Another data directory, the same ports: refused, naming what holds each port.
        third = start_up(tmp_path / "elsewhere", offset)
        out, _ = third.communicate(timeout=60)
        assert third.returncode == 1, out
        lines = out.splitlines()
        assert lines[0].startswith(
            f"headwater up: port {8081 + offset} (registry) is taken by a Headwater schema "
            "registry (pid "
        )
        assert lines[1].startswith(
            f"headwater up: port {8082 + offset} (broker-0) is taken by a Headwater broker (pid "
        )
        assert lines[2].startswith(
            f"headwater up: port {8090 + offset} (coordinator) is taken by a Headwater "
            "coordinator (pid "
        )
        assert lines[3] == (
            "headwater up: nothing was started. Is another headwater up running? Stop it, or "
            "move this one with --port-offset (e.g. --port-offset 1000)"
        )
        assert not (tmp_path / "elsewhere" / "coordinator").exists()

        # The first one still serves: its Redis socket is there and groups work.
        assert socket_file.exists()
        beat = heartbeat(coordinator, topic)
        assert beat.status_code == 200, beat.text
        assert httpx.get(f"{coordinator}/readyz").json()["redis"] == "ok"
        assert httpx.get(f"{broker}/topics/{topic}").status_code == 200
        assert httpx.get(f"{registry}/subjects").status_code == 200
    finally:
        stop(first)
    assert first.returncode == 0


def test_services_left_by_a_killed_up_keep_its_data_directory(tmp_path: Path) -> None:
    offset = port_offset_with_free_ports()
    up = start_up(tmp_path, offset)
    pids: list[int] = []
    try:
        wait_until_up(up)
        note = orjson.loads((tmp_path / ".lock").read_bytes())
        pids = list(note["pids"].values())
        up.kill()  # its services live on, orphaned
        up.wait()
        again = start_up(tmp_path, port_offset_with_free_ports())
        out, _ = again.communicate(timeout=60)
        assert again.returncode == 1, out
        assert out.startswith(
            f"headwater up: data directory {tmp_path} is still held by the services of a "
            f"headwater up that is gone (pid {up.pid}): registry "
        )
        assert out.endswith(
            f"Stop them first (kill {' '.join(map(str, pids))}), or give this one another "
            "--data-dir\n"
        )
    finally:
        stop(up)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.1)
    assert pids == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # An orphan that exited but is not reaped yet counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_up_runs_a_cluster_and_starts_a_killed_broker_again(tmp_path: Path) -> None:
    offset = port_offset_with_free_ports()
    up = start_up(tmp_path, offset, "--brokers", "2")
    try:
        output = wait_until_up(up)
        first, second = (f"http://127.0.0.1:{8082 + offset + i}" for i in (0, 1))
        assert f"broker-1     {second}" in output
        described = subprocess.run(
            [sys.executable, "-m", "headwater_cli", "cluster", "describe"],
            cwd=ROOT,
            env={**os.environ, "HEADWATER_BROKERS": second},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[1].startswith("Controller: broker ")
        assert lines[2].split() == ["BROKER", "STATE", "RACK", "URL"]
        assert [line.split()[0] for line in lines[3:]] == ["0", "1"]
        assert (tmp_path / "cluster.db").exists()  # one metadata file, shared
        pid = httpx.get(f"{second}/healthz").json()["pid"]
        os.kill(pid, signal.SIGKILL)
        assert up.stdout is not None
        deadline = time.monotonic() + 90
        seen = ""
        while "broker-1 is back" not in seen and time.monotonic() < deadline:
            seen += up.stdout.readline()
        assert "headwater: broker-1 exited; starting it again in 2 s" in seen
        assert "broker-1 is back" in seen
        assert httpx.get(f"{second}/healthz").json()["pid"] != pid
        assert httpx.get(f"{first}/cluster").status_code == 200  # the rest kept running
        assert up.poll() is None
    finally:
        stop(up)
