"""`headwater up` (what `make up` runs): services start on embedded defaults, stop on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, port_offset_with_free_ports, unique

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_up_serves_every_service_then_stops_them_all(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    offset = port_offset_with_free_ports()
    registry, broker, coordinator = (f"http://127.0.0.1:{p + offset}" for p in (8081, 8082, 8090))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BROKER_", "REGISTRY_"))}
    env.pop("COORDINATOR_REDIS_URL", None)  # embedded defaults: the private Redis
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "headwater_cli",
            "up",
            "--data-dir",
            str(tmp_path),
            "--port-offset",
            str(offset),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
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
        for url in (registry, broker, coordinator):
            assert url in output

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
        beat = httpx.post(
            f"{coordinator}/groups/{unique('g')}/heartbeat",
            json={"member_epoch": 0, "topics": [topic]},
        )
        assert beat.status_code == 200, beat.text
        assert (tmp_path / "registry.db").exists()
        assert (tmp_path / "broker-0" / f"{topic}-1").is_dir()

        up.send_signal(stop_signal)
        assert up.wait(timeout=60) == 0
        for url in (registry, broker, coordinator):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/healthz", timeout=1)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
