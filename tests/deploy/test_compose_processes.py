"""docker-compose.yml's app services run as plain processes with their declared command and env.

They must come up healthy and serve a produce/fetch round trip and a schema registration; the
Spark validation job (profile ``spark``) runs the same way over a crafted topic. The file
is parsed (tests/deploy/compose.py); each service's ``command`` is run as is (with this interpreter
as ``python``) and its ``environment`` kept, except what only makes sense inside the compose
network, rewritten by one rule each: listen ports become free loopback ports, ``0.0.0.0`` becomes
``127.0.0.1``, data directories move to ``tmp_path``, container host:port pairs (``broker-0:8082``,
``redis:6379``) point at the test's processes and the machine's Redis, the PostgreSQL URLs (the
registry's and the brokers' metadata) become a fresh database, and the Redis key prefix a private
one.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
import yaml

from tests.deploy import compose
from tests.support import ROOT, ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e

COMPOSE_FILE = ROOT / "docker-compose.yml"
APPS = ("registry", "broker-0", "broker-1", "broker-2", "coordinator")
MACHINE_SERVICES = {"redis:6379": "127.0.0.1:6379"}
CONTAINER_HOST = re.compile(r"//(redis|postgres|registry|broker-\d|coordinator|localhost)[:/]")


def start_order(services: dict[str, Any]) -> list[str]:
    """Apps in depends_on order (Redis and PostgreSQL are the machine's, already running)."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order or name not in APPS:
            return
        for dependency in services[name].get("depends_on", {}):
            visit(dependency)
        order.append(name)

    for name in APPS:
        visit(name)
    return order


def published_port(service: dict[str, Any]) -> int:
    [mapping] = service["ports"]
    host, container = mapping.split(":")
    assert host == container  # the README documents one port per service, inside and out
    return int(container)


def process_environment(
    name: str,
    declared: dict[str, str],
    ports: dict[str, int],
    endpoints: dict[str, str],
    tmp_path: Path,
    postgres_url: str,
    redis_prefix: str,
) -> dict[str, str]:
    env: dict[str, str] = {}
    for key, value in declared.items():
        if key.endswith("_PORT"):
            env[key] = str(ports[name])
        elif key.endswith("_HOST"):
            assert value == "0.0.0.0"
            env[key] = "127.0.0.1"
        elif key.endswith("_DATA_DIR"):
            assert value == "/var/lib/headwater/data"
            env[key] = str(tmp_path / name)
        elif key in ("REGISTRY_DATABASE_URL", "BROKER_METADATA_URL"):
            assert value.startswith("postgresql+psycopg://headwater:")
            assert value.endswith("@postgres:5432/registry")
            env[key] = postgres_url
        elif key == "COORDINATOR_KEY_PREFIX":
            assert value == "headwater:"
            env[key] = redis_prefix
        else:
            for container, local in endpoints.items():
                value = value.replace(f"//{container}", f"//{local}")
            assert not CONTAINER_HOST.search(value), (key, value)
            env[key] = value
    return env


def healthcheck(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run a container healthcheck (exec form, ``python`` first) as a local command."""
    assert command[0] == "python"
    return subprocess.run(
        [sys.executable, *command[1:]],
        env={**os.environ, **env},
        capture_output=True,
        timeout=30,
    )


def dockerfile_healthcheck() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if line.startswith("HEALTHCHECK ")]
    command: list[str] = yaml.safe_load(line.split(" CMD ", 1)[1])
    return command


@pytest.fixture
def platform(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> Iterator[dict[str, tuple[ServiceProcess, dict[str, Any]]]]:
    services = compose.load(COMPOSE_FILE, {"POSTGRES_PASSWORD": "compose-test"})["services"]
    apps = {name: s for name, s in services.items() if s.get("command", [])[:2] == ["python", "-m"]}
    assert set(apps) == set(APPS)
    ports = {name: free_port() for name in APPS}
    endpoints = dict(MACHINE_SERVICES)
    for name in APPS:
        container_port = published_port(apps[name])
        endpoints[f"{name}:{container_port}"] = f"127.0.0.1:{ports[name]}"
        endpoints[f"localhost:{container_port}"] = f"127.0.0.1:{ports[name]}"
    running: dict[str, tuple[ServiceProcess, dict[str, Any]]] = {}
    try:
        for name in start_order(services):
            service = apps[name]
            env = process_environment(
                name,
                compose.environment(service),
                ports,
                endpoints,
                tmp_path,
                postgres_url,
                redis_prefix,
            )
            command = service["command"]
            process = ServiceProcess(
                command[2],
                ports[name],
                env,
                log_path=tmp_path / f"{name}.log",
                args=tuple(command[3:]),
            )
            running[name] = (process, {"env": env, "service": service})
            process.start(timeout=60)
        yield running
    finally:
        for process, _ in reversed(running.values()):
            process.stop()


def test_compose_services_come_up_healthy_and_serve(
    platform: dict[str, tuple[ServiceProcess, dict[str, Any]]], tmp_path: Path
) -> None:
    assert list(platform) == ["registry", "broker-0", "broker-1", "broker-2", "coordinator"]
    image_check = dockerfile_healthcheck()
    for name, (process, declared) in platform.items():
        assert httpx.get(f"{process.url}/readyz", timeout=5).status_code == 200, name
        # The compose healthcheck, pointed at this process's port, and the image's own one.
        [_, *command] = declared["service"]["healthcheck"]["test"]
        container_port = published_port(declared["service"])
        command = [part.replace(f":{container_port}/", f":{process.port}/") for part in command]
        result = healthcheck(command, declared["env"])
        assert result.returncode == 0, (name, result.stderr)
        result = healthcheck(image_check, declared["env"])
        assert result.returncode == 0, (name, result.stderr)

    # One cluster: the topic created at broker-1 (carried out by the controller) exists at
    # every broker; produce and fetch through every broker (REST Proxy v2 JSON) reach the
    # leader of partition 1, broker-0.
    topic = unique("compose")
    created = httpx.post(
        f"{platform['broker-1'][0].url}/topics",
        json={"name": topic, "replica_assignment": [[1, 2, 0], [0, 1, 2]]},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    for i in range(3):
        broker = platform[f"broker-{i}"][0].url
        cluster = httpx.get(f"{broker}/cluster", timeout=10).json()
        assert [b["state"] for b in cluster["brokers"]] == ["active"] * 3
        produced = httpx.post(
            f"{broker}/topics/{topic}",
            content=json.dumps(
                {
                    "records": [
                        {"value": {"broker": i, "n": 1}, "partition": 1},
                        {"key": "k", "value": {"broker": i, "n": 2}, "partition": 1},
                    ]
                }
            ),
            headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
            timeout=10,
        )
        assert produced.status_code == 200, produced.text
        assert [o["offset"] for o in produced.json()["offsets"]] == [2 * i, 2 * i + 1]
        assert [o["partition"] for o in produced.json()["offsets"]] == [1, 1]
        fetched = httpx.get(
            f"{broker}/topics/{topic}/partitions/1/records",
            params={"offset": 2 * i},
            headers={"Accept": "application/vnd.kafka.json.v2+json"},
            timeout=10,
        )
        assert fetched.status_code == 200, fetched.text
        records = fetched.json()
        assert [(r["offset"], r["key"], r["value"]) for r in records] == [
            (2 * i, None, {"broker": i, "n": 1}),
            (2 * i + 1, "k", {"broker": i, "n": 2}),
        ]
        assert {r["topic"] for r in records} == {topic}

    # Register a schema in the registry (backed by the fresh PostgreSQL database).
    registry = platform["registry"][0].url
    subject = f"{topic}-value"
    schema = {
        "type": "record",
        "name": "Reading",
        "fields": [{"name": "n", "type": "long"}],
    }
    media = "application/vnd.schemaregistry.v1+json"
    registered = httpx.post(
        f"{registry}/subjects/{subject}/versions",
        content=json.dumps({"schema": json.dumps(schema)}),
        headers={"Content-Type": media},
        timeout=10,
    )
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    assert isinstance(schema_id, int)
    by_id = httpx.get(f"{registry}/schemas/ids/{schema_id}", timeout=10).json()
    assert json.loads(by_id["schema"]) == schema
    assert httpx.get(f"{registry}/subjects/{subject}/versions", timeout=10).json() == [1]

    # The coordinator reaches the brokers through its declared COORDINATOR_BROKERS and Redis
    # through COORDINATOR_REDIS_URL: commit an offset, then read the group's lag.
    coordinator = platform["coordinator"][0].url
    group = unique("compose-group")
    committed = httpx.post(
        f"{coordinator}/groups/{group}/offsets",
        json={"offsets": [{"topic": topic, "partition": 1, "offset": 1}]},
        timeout=10,
    )
    assert committed.status_code == 204, committed.text
    lag = httpx.get(f"{coordinator}/groups/{group}/lag", timeout=10)
    assert lag.status_code == 200, lag.text
    assert lag.json() == {
        "group_id": group,
        "total_lag": 5,
        "partitions": [
            {
                "topic": topic,
                "partition": 0,
                "member_id": None,
                "committed_offset": None,
                "end_offset": 0,
                "lag": 0,
            },
            {
                "topic": topic,
                "partition": 1,
                "member_id": None,
                "committed_offset": 1,
                "end_offset": 6,
                "lag": 5,
            },
        ],
    }

    # The domain metrics each service defines appear on the same /metrics page.
    broker_metrics = httpx.get(f"{platform['broker-0'][0].url}/metrics", timeout=10).text
    assert f'headwater_broker_produce_records_total{{topic="{topic}"}} 6.0' in broker_metrics
    assert f'headwater_broker_fetch_records_total{{topic="{topic}"}} 6.0' in broker_metrics
    assert f'headwater_broker_log_end_offset{{partition="1",topic="{topic}"}} 6.0' in broker_metrics
    # HTTP series carry route templates, not raw paths: one series however many topics there are.
    assert (
        'headwater_http_requests_total{method="POST",route="/topics/{topic}",status="200"} 1.0'
        in broker_metrics
    )
    registry_metrics = httpx.get(f"{registry}/metrics", timeout=10).text
    assert (
        'headwater_http_requests_total{method="POST",route="/subjects/{subject}/versions",'
        'status="200"} 1.0' in registry_metrics
    )
    assert f"/subjects/{subject}" not in registry_metrics
    assert "# TYPE headwater_registry_cache_hits_total counter" in registry_metrics
    coordinator_metrics = httpx.get(f"{platform['coordinator'][0].url}/metrics", timeout=10).text
    assert "# TYPE headwater_coordinator_rebalances_total counter" in coordinator_metrics

    # Every service exports HTTP metrics and logs JSON lines stamped with its name.
    for name, (process, _) in platform.items():
        metrics = httpx.get(f"{process.url}/metrics", timeout=10)
        assert metrics.status_code == 200
        assert 'headwater_http_requests_total{method="GET",route="/readyz",status="200"}' in (
            metrics.text
        )
        lines = (tmp_path / f"{name}.log").read_text().splitlines()
        assert lines, name
        parsed = [json.loads(line) for line in lines if line.strip()]
        expected = name.split("-")[0]
        assert {line["service"] for line in parsed} == {expected}, name


def confluent_avro(schema: dict[str, Any], schema_id: int, record: dict[str, Any]) -> bytes:
    """Confluent wire format: 0x00, the 4-byte big-endian schema id, Avro binary."""
    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.mark.spark
def test_compose_validation_job_runs_as_a_plain_process(
    platform: dict[str, tuple[ServiceProcess, dict[str, Any]]], tmp_path: Path
) -> None:
    topic = unique("compose-validate")
    services = compose.load(
        COMPOSE_FILE, {"POSTGRES_PASSWORD": "compose-test", "VALIDATE_TOPIC": topic}
    )["services"]
    job = services["validate"]
    broker = platform["broker-0"][0].url
    registry = platform["registry"][0].url
    dead_letter = f"{topic}-dead-letter"
    assert job["command"][2] == topic
    assert job["command"][job["command"].index("--dead-letter-topic") + 1] == dead_letter
    # Led by broker-0, the job's first bootstrap server, until the clients route each
    # partition to its leader by themselves.
    for name in (topic, dead_letter):
        body = {"name": name, "replica_assignment": [[0, 1, 2]]}
        response = httpx.post(f"{broker}/topics", json=body, timeout=10)
        assert response.status_code == 201, response.text
    schema = {"type": "record", "name": "Reading", "fields": [{"name": "n", "type": "long"}]}
    registered = httpx.post(
        f"{registry}/subjects/{topic}-value/versions",
        json={"schema": json.dumps(schema)},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    values = [
        confluent_avro(schema, schema_id, {"n": 1}),
        b'{"n": 2}',  # JSON where Confluent framing is expected
        confluent_avro(schema, schema_id, {"n": 3}),
    ]
    produced = httpx.post(
        f"{broker}/topics/{topic}",
        json={"records": [{"value": base64.b64encode(v).decode()} for v in values]},
        headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
        timeout=10,
    )
    assert produced.status_code == 200, produced.text

    # The declared command and environment, with container paths and hosts pointed locally.
    output = tmp_path / "output"
    output.mkdir()
    endpoints = {
        f"{name}:{published_port(platform[name][1]['service'])}": f"127.0.0.1:{p.port}"
        for name, (p, _) in platform.items()
    }
    env: dict[str, str] = {}
    for key, value in compose.environment(job).items():
        for container, local in endpoints.items():
            value = value.replace(f"//{container}", f"//{local}")
        assert not CONTAINER_HOST.search(value), (key, value)
        env[key] = value
    assert job["working_dir"] == "/var/lib/headwater/output"
    command = [part.replace(job["working_dir"], str(output)) for part in job["command"]]
    assert command[0] == "headwater"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "headwater"), *command[1:]],
        cwd=output,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((output / "summary.json").read_text())
    assert summary["records"] == 3
    assert summary["outcomes"] == {"invalid": 1, "valid": 2}
    assert summary["reasons"] == {"BAD_FRAMING": 1}
    assert list((output / "valid").rglob("*.parquet"))
    dead = httpx.get(
        f"{broker}/topics/{dead_letter}/partitions/0/records",
        params={"offset": 0},
        headers={"Accept": "application/vnd.kafka.binary.v2+json"},
        timeout=10,
    )
    assert dead.status_code == 200, dead.text
    assert [base64.b64decode(r["value"]) for r in dead.json()] == [b'{"n": 2}']
