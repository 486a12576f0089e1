"""Spark suite fixtures: one local SparkSession and one real broker + registry for the session."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import httpx
import pytest
from pyspark.sql import SparkSession

from headwater.producer import Producer
from headwater_spark.session import build_session
from tests.conftest import require
from tests.support import ServiceProcess, free_port, unique


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for the whole suite: Spark takes ~10 s to start on this machine."""
    require("java")
    session = build_session("local[2]", app_name="headwater-tests", shuffle_partitions=2)
    yield session
    session.stop()


@dataclass
class Platform:
    """A real broker and registry, with the calls tests make to set up topics and schemas."""

    broker: str
    registry: str

    def create_topic(
        self, prefix: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> str:
        name = unique(prefix)
        response = httpx.post(
            f"{self.broker}/topics",
            json={"name": name, "partitions": partitions, "configs": configs or {}},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        return name

    def register(
        self, subject: str, schema: Any, references: list[dict[str, Any]] | None = None
    ) -> int:
        body: dict[str, Any] = {"schema": json.dumps(schema)}
        if references:
            body["references"] = references
        response = httpx.post(
            f"{self.registry}/subjects/{subject}/versions",
            json=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        schema_id: int = response.json()["id"]
        return schema_id

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | None],
        partition: int | None = 0,
        keys: Sequence[bytes | None] | None = None,
    ) -> None:
        with Producer({"bootstrap.servers": self.broker, "linger.ms": 1}) as producer:
            for i, value in enumerate(values):
                key = keys[i] if keys is not None else None
                producer.produce(
                    topic, value=value, key=key, partition=-1 if partition is None else partition
                )
            assert producer.flush(30) == 0

    def fetch_all(self, topic: str, partition: int = 0) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{self.broker}/topics/{topic}/partitions/{partition}/records",
            params={"offset": 0, "max_bytes": 64 * 1024 * 1024},
            headers={"Accept": "application/vnd.kafka.binary.v2+json"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        records: list[dict[str, Any]] = response.json()
        return records


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    root = tmp_path_factory.mktemp("platform")
    broker_port, registry_port = free_port(), free_port()
    broker = ServiceProcess(
        "headwater_broker",
        broker_port,
        {
            "BROKER_PORT": str(broker_port),
            "BROKER_DATA_DIR": str(root / "broker-0"),
            "BROKER_FSYNC": "never",
            "BROKER_LOG_LEVEL": "warning",
            # Retention runs often, so tests can move a log start past a query's position.
            "BROKER_RETENTION_CHECK_INTERVAL_MS": "200",
        },
        log_path=root / "broker.log",
    )
    registry = ServiceProcess(
        "headwater_registry",
        registry_port,
        {
            "REGISTRY_PORT": str(registry_port),
            "REGISTRY_DATABASE_URL": f"sqlite:///{root / 'registry.db'}",
            "REGISTRY_LOG_LEVEL": "warning",
        },
        log_path=root / "registry.log",
    )
    with broker, registry:
        yield Platform(broker.url, registry.url)


def avro_frame(
    schema_id: int, schema: Any, record: Any, named: dict[str, Any] | None = None
) -> bytes:
    """A value in the Confluent wire format: 0x00, 4-byte big-endian id, Avro binary."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema, named_schemas=named), record)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()
