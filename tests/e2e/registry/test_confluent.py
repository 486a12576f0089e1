"""Interop proof: confluent-kafka's registry client and Avro serde against a registry process."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryError
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import headwater
from headwater.registry.errors import IncompatibleSchemaError, SubjectNotFoundError
from headwater.registry.schema import SchemaReference
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e

V1 = orjson.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
    }
).decode()
V2 = orjson.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
).decode()
INCOMPATIBLE = orjson.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [{"name": "id", "type": "string"}],
    }
).decode()


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data: Path = tmp_path_factory.mktemp("registry")
    port = free_port()
    env = {"REGISTRY_PORT": str(port), "REGISTRY_DATABASE_URL": f"sqlite:///{data / 'r.db'}"}
    with ServiceProcess("headwater_registry", port, env, log_path=data / "registry.log") as proc:
        yield proc.url


def test_confluent_client_register_evolve_reject(registry_url: str) -> None:
    client = ConfluentClient({"url": registry_url})
    subject = unique("orders") + "-value"
    id1 = client.register_schema(subject, Schema(V1, "AVRO"))
    assert client.register_schema(subject, Schema(V1, "AVRO")) == id1
    assert client.get_schema(id1).schema_str == V1
    assert client.lookup_schema(subject, Schema(V1, "AVRO")).version == 1
    assert client.test_compatibility(subject, Schema(V2, "AVRO")) is True
    id2 = client.register_schema(subject, Schema(V2, "AVRO"))
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (id2, 2, subject)
    assert client.get_versions(subject) == [1, 2]
    assert client.test_compatibility(subject, Schema(INCOMPATIBLE, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema(subject, Schema(INCOMPATIBLE, "AVRO"))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code == 40901
    # Its annotation says str; the client returns the decoded body.
    updated: object = client.set_compatibility(subject, "NONE")
    assert updated == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert client.register_schema(subject, Schema(INCOMPATIBLE, "AVRO")) > id2


def test_confluent_serde_round_trip_and_headwater_interop(registry_url: str) -> None:
    conf_client = ConfluentClient({"url": registry_url})
    topic = unique("payments")
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = ConfluentSerializer(conf_client, V1)
    deserialize = ConfluentDeserializer(conf_client)
    order = {"id": 7, "amount": 12.5}
    data = serialize(order, ctx)
    assert data is not None
    schema_id = int.from_bytes(data[1:5], "big")
    assert data[0] == 0
    assert conf_client.get_latest_version(f"{topic}-value").schema_id == schema_id
    assert deserialize(data, ctx) == order

    with headwater.SchemaRegistryClient(registry_url) as ours:
        # Confluent wrote it; Headwater reads it, into the newer reader schema too.
        assert headwater.AvroDeserializer(ours)(data) == order
        evolved = headwater.AvroDeserializer(ours, reader_schema=V2)(data)
        assert evolved == {"id": 7, "amount": 12.5, "note": None}
        # Headwater writes with V2 (registered as version 2); Confluent reads it.
        written = headwater.AvroSerializer(ours, V2)({**order, "note": "hi"}, topic)
        assert written[0] == 0
        assert deserialize(written, ctx) == {"id": 7, "amount": 12.5, "note": "hi"}
        assert ours.get_versions(f"{topic}-value") == [1, 2]
        with pytest.raises(IncompatibleSchemaError):
            headwater.AvroSerializer(ours, INCOMPATIBLE)({"id": "x"}, topic)


def test_subject_with_slash_through_confluent_client(registry_url: str) -> None:
    client = ConfluentClient({"url": registry_url})
    subject = f"{unique('team')}/orders-value"
    schema_id = client.register_schema(subject, Schema(V1, "AVRO"))
    assert subject in client.get_subjects()
    assert client.get_latest_version(subject).schema_id == schema_id
    assert client.lookup_schema(subject, Schema(V1, "AVRO")).subject == subject
    assert client.delete_subject(subject) == [1]
    assert client.delete_subject(subject, permanent=True) == [1]
    with headwater.SchemaRegistryClient(registry_url) as ours, pytest.raises(SubjectNotFoundError):
        ours.get_versions(subject)


def test_raw_http_like_curl(registry_url: str) -> None:
    """Exactly the bytes curl would send: percent-encoded slash, octet-stream body."""
    host, port = registry_url.removeprefix("http://").split(":")
    subject = f"{unique('raw')}/x"
    path = "/subjects/" + subject.replace("/", "%2F") + "/versions"
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    body = orjson.dumps({"schema": V1})
    conn.request(
        "POST",
        path,
        body=body,
        headers={"Content-Type": "application/octet-stream", "Accept": "*/*"},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "application/vnd.schemaregistry.v1+json"
    schema_id = orjson.loads(response.read())["id"]
    conn.request("GET", path + "/latest")
    response = conn.getresponse()
    assert orjson.loads(response.read()) == {
        "subject": subject,
        "version": 1,
        "id": schema_id,
        "schema": V1,
    }
    conn.request("GET", "/subjects/nope%2Fnothing/versions")
    response = conn.getresponse()
    assert response.status == 404
    assert orjson.loads(response.read()) == {
        "error_code": 40401,
        "message": "Subject 'nope/nothing' not found.",
    }
    conn.close()


def test_references_through_both_serdes(registry_url: str) -> None:
    address = orjson.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "com.acme",
            "fields": [{"name": "city", "type": "string"}],
        }
    ).decode()
    user = orjson.dumps(
        {
            "type": "record",
            "name": "User",
            "namespace": "com.acme",
            "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "Address"}],
        }
    ).decode()
    base = unique("address") + "-value"
    topic = unique("users")
    with headwater.SchemaRegistryClient(registry_url) as ours:
        ours.register_schema(base, address)
        ref = SchemaReference("com.acme.Address", base, 1)
        datum = {"name": "ada", "home": {"city": "London"}}
        data = headwater.AvroSerializer(ours, user, references=[ref])(datum, topic)
        assert headwater.AvroDeserializer(ours)(data) == datum
        registered = ours.get_latest_version(f"{topic}-value")
        assert registered.references == (ref,)
    conf_client = ConfluentClient({"url": registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert ConfluentDeserializer(conf_client)(data, ctx) == datum
