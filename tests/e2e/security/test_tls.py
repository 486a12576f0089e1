"""TLS on the brokers and the coordinator, as processes: the SDK with Kafka's ``ssl.*`` keys,
mutual TLS, and a three-broker cluster replicating acks=all over mutually authenticated TLS."""

from __future__ import annotations

import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.topic_partition import OFFSET_BEGINNING
from tests.support import ServiceProcess, free_port, unique
from tests.support.cluster import BrokerCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Pki:
    """A test CA and files signed by it: the services' certificate and a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("alice@example.test", common_name="alice")
    paths = {
        name: root / f"{name}.pem" for name in ("ca", "other", "server", "skey", "client", "ckey")
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    other.cert_pem.write_to_path(str(paths["other"]))
    server.cert_chain_pems[0].write_to_path(str(paths["server"]))
    server.private_key_pem.write_to_path(str(paths["skey"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client"]))
    client.private_key_pem.write_to_path(str(paths["ckey"]))
    return Pki(
        paths["ca"], paths["server"], paths["skey"], paths["client"], paths["ckey"], paths["other"]
    )


def tls_env(prefix: str, pki: Pki, client_auth: str = "none") -> dict[str, str]:
    return {
        f"{prefix}TLS_CERT_FILE": str(pki.server_cert),
        f"{prefix}TLS_KEY_FILE": str(pki.server_key),
        f"{prefix}TLS_CA_FILE": str(pki.ca),
        f"{prefix}TLS_CLIENT_AUTH": client_auth,
    }


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    data, port = tmp_path_factory.mktemp("tls-broker"), free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(data), **tls_env("BROKER_", pki)}
    with ServiceProcess("headwater_broker", port, env, log_path=data / "broker.log") as broker:
        yield broker


def test_an_https_url_means_tls_whatever_the_protocol_says(
    tls_broker: ServiceProcess, pki: Pki
) -> None:
    with AdminClient({"bootstrap.servers": tls_broker.url, "ssl.ca.location": str(pki.ca)}) as a:
        assert isinstance(a.topic_names(), list)


def test_the_sdk_produces_and_consumes_over_tls_with_kafkas_keys(
    tls_broker: ServiceProcess, pki: Pki
) -> None:
    assert tls_broker.url.startswith("https://")
    host_port = tls_broker.url.removeprefix("https://")
    config = {
        "bootstrap.servers": host_port,  # a bare host:port is https under SSL
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
    }
    topic = unique("tls")
    with AdminClient(config) as admin:
        admin.create_topic(topic, 1)
    with Producer(config) as producer:
        for i in range(3):
            producer.produce(topic, value=f"v{i}".encode())
        producer.flush(10)
    with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values = [m.value() for m in consumer.consume(3, timeout=10)]
    assert values == [b"v0", b"v1", b"v2"]


def test_clients_that_do_not_trust_the_ca_or_speak_plain_http_get_nothing(
    tls_broker: ServiceProcess, pki: Pki
) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(
            f"{tls_broker.url}/topics", verify=ssl.create_default_context(cafile=str(pki.other_ca))
        )
    with pytest.raises(httpx.HTTPError):
        httpx.get(tls_broker.url.replace("https://", "http://") + "/topics", timeout=5)
    with pytest.raises(ValueError, match=r"plain HTTP but security\.protocol is SSL"):
        Producer({"bootstrap.servers": "http://127.0.0.1:1", "security.protocol": "SSL"})
    with pytest.raises(ValueError, match=r"ssl\.ca\.location: no such file"):
        Producer(
            {
                "bootstrap.servers": tls_broker.url,
                "security.protocol": "SSL",
                "ssl.ca.location": "/nope.pem",
            }
        )


def test_mutual_tls_refuses_a_client_without_a_certificate(pki: Pki, tmp_path: Path) -> None:
    port = free_port()
    env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path),
        **tls_env("BROKER_", pki, client_auth="required"),
    }
    with ServiceProcess("headwater_broker", port, env, log_path=tmp_path / "broker.log") as broker:
        no_certificate = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{broker.url}/topics", verify=no_certificate, timeout=5)
        config = {
            "bootstrap.servers": broker.url,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }
        with AdminClient(config) as admin:
            name = unique("mtls")
            admin.create_topic(name, 1)
            assert name in admin.topic_names()


def test_three_brokers_replicate_over_mutual_tls(pki: Pki, tmp_path: Path) -> None:
    cluster = BrokerCluster(tmp_path, 3, env=tls_env("BROKER_", pki, client_auth="required"))
    try:
        cluster.start_all()
        config = {
            "bootstrap.servers": cluster.url(0),
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
            "acks": "all",
        }
        topic = unique("replicated")
        with AdminClient(config) as admin:
            admin.create_topic(topic, 1, replication_factor=3)
        with Producer(config) as producer:
            for i in range(20):
                producer.produce(topic, value=str(i).encode())
            assert producer.flush(30) == 0

        def replicated() -> bool:
            answer = httpx.get(f"{cluster.url(1)}/topics/{topic}", verify=cluster.verify, timeout=5)
            (partition,) = answer.json()["partitions"]
            return sorted(partition["isr"]) == [0, 1, 2] and partition["end_offset"] == 20

        wait_until(replicated, 30, "every replica in sync at offset 20")
    finally:
        cluster.stop_all()


def test_the_cli_takes_a_kafka_properties_file(
    tls_broker: ServiceProcess, pki: Pki, tmp_path: Path
) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        f"# as for kafka-topics.sh --command-config\nsecurity.protocol=SSL\n"
        f"ssl.ca.location = {pki.ca}\n"
    )
    host_port = tls_broker.url.removeprefix("https://")
    topic = unique("cli-tls")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "headwater_cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    common = ("--bootstrap-server", host_port, "--command-config", str(properties))
    created = cli("topics", "create", topic, "--partitions", "2", *common)
    assert created.returncode == 0, created.stderr
    listed = cli("topics", "list", *common)
    assert (listed.returncode, topic in listed.stdout) == (0, True), listed.stderr
    described = cli("cluster", "describe", *common)
    assert described.returncode == 0, described.stderr
    assert tls_broker.url in described.stdout  # the broker advertises its https URL
    untrusted = ("--bootstrap-server", tls_broker.url, "--request-timeout-ms", "2000")
    without = cli("topics", "list", *untrusted)  # no CA: the certificate does not verify
    assert without.returncode == 1


def test_the_registry_over_tls_serves_confluents_client(pki: Pki, tmp_path: Path) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry

    from headwater.registry.client import SchemaRegistryClient

    port = free_port()
    env = {
        "REGISTRY_PORT": str(port),
        "REGISTRY_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}",
        **tls_env("REGISTRY_", pki),
    }
    with ServiceProcess("headwater_registry", port, env, tmp_path / "registry.log") as registry:
        assert registry.url.startswith("https://")
        schema = '{"type": "record", "name": "T", "fields": [{"name": "a", "type": "long"}]}'
        with ConfluentRegistry({"url": registry.url, "ssl.ca.location": str(pki.ca)}) as confluent:
            schema_id = confluent.register_schema("tls-value", Schema(schema, "AVRO"))
        ours = SchemaRegistryClient(
            registry.url, ssl_context=ssl.create_default_context(cafile=str(pki.ca))
        )
        with ours:
            assert ours.get_schema(schema_id).schema_str.replace(" ", "") == schema.replace(" ", "")


def test_a_group_consumer_over_tls_to_the_coordinator_and_brokers(
    tls_broker: ServiceProcess, pki: Pki, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        "COORDINATOR_PORT": str(port),
        "COORDINATOR_BROKERS": tls_broker.url,
        "COORDINATOR_DATA_DIR": str(tmp_path / "coordinator"),
        **tls_env("COORDINATOR_", pki),
    }
    with ServiceProcess("headwater_coordinator", port, env, tmp_path / "coordinator.log") as coord:
        config = {
            "bootstrap.servers": tls_broker.url,
            "coordinator.url": coord.url,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
        }
        topic = unique("group-tls")
        with AdminClient(config) as admin:
            admin.create_topic(topic, 2)
        with Producer(config) as producer:
            for i in range(4):
                producer.produce(topic, value=f"g{i}".encode(), partition=i % 2)
            producer.flush(10)
        group = {"group.id": unique("g"), "auto.offset.reset": "earliest"}
        with Consumer({**config, **group}) as consumer:
            consumer.subscribe([topic])
            seen: list[bytes | None] = []

            def four() -> bool:
                seen.extend(m.value() for m in consumer.consume(4, timeout=1))
                return len(seen) >= 4

            wait_until(four, 30, "four records through the group")
            consumer.commit(asynchronous=False)
        assert sorted(v or b"" for v in seen) == [b"g0", b"g1", b"g2", b"g3"]
