"""Client configuration: Kafka's key names, defaults, and clear errors naming a bad key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from headwater.config import AdminConfig, ConsumerConfig, ProducerConfig, parse_config
from headwater.records import Compression


def test_producer_defaults() -> None:
    cfg = ProducerConfig.from_dict({})
    assert cfg.bootstrap_servers == ("http://127.0.0.1:8082",)
    assert (cfg.acks, cfg.linger_ms, cfg.batch_size) == (-1, 5, 1_000_000)
    assert cfg.compression is Compression.NONE
    assert cfg.enable_idempotence is True
    assert (cfg.max_in_flight, cfg.retries, cfg.delivery_timeout_ms) == (5, 2**31 - 1, 120_000)


def test_values_as_strings_like_a_properties_file() -> None:
    cfg = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "127.0.0.1:9000, https://b.example:443/",
            "acks": "1",
            "linger.ms": "20",
            "compression.type": "ZSTD",
            "client.id": "orders",
        }
    )
    assert cfg.bootstrap_servers == ("http://127.0.0.1:9000", "https://b.example:443")
    assert (cfg.acks, cfg.linger_ms, cfg.compression, cfg.client_id) == (
        1,
        20,
        Compression.ZSTD,
        "orders",
    )
    # acks=1 without an explicit enable.idempotence turns idempotence off, as Kafka's clients do.
    assert cfg.enable_idempotence is False


@pytest.mark.parametrize(("raw", "acks"), [("all", -1), (-1, -1), ("-1", -1), (0, 0), (1, 1)])
def test_acks_spellings(raw: object, acks: int) -> None:
    assert ProducerConfig.from_dict({"acks": raw, "enable.idempotence": False}).acks == acks


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"bootstrap.server": "x"}, "unknown configuration key(s): 'bootstrap.server'"),
        ({"acks": "2"}, "acks: expected 0, 1, all or -1, got '2'"),
        ({"linger.ms": -1}, "linger.ms: -1 is outside [0, "),
        ({"linger.ms": "soon"}, "linger.ms: expected an integer, got 'soon'"),
        ({"batch.size": True}, "batch.size: expected an integer, got True"),
        ({"compression.type": "brotli"}, "compression.type: unknown compression 'brotli'"),
        ({"enable.idempotence": "yes"}, "enable.idempotence: expected true or false, got 'yes'"),
        ({"bootstrap.servers": " , "}, "bootstrap.servers: at least one broker URL is required"),
        ({"bootstrap.servers": "ftp://x"}, "bootstrap.servers: 'ftp://x' is not an http(s) URL"),
        ({"acks": "1", "enable.idempotence": True}, "enable.idempotence: requires acks=all"),
        (
            {"max.in.flight.requests.per.connection": 6},
            "max.in.flight.requests.per.connection: at most 5 with enable.idempotence",
        ),
    ],
)
def test_bad_producer_config_names_the_key(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        ProducerConfig.from_dict(config)


def test_consumer_config() -> None:
    cfg = ConsumerConfig.from_dict(
        {
            "group.id": "billing",
            "auto.offset.reset": "Earliest",
            "enable.auto.commit": "false",
            "max.poll.records": 10,
            "coordinator.url": "http://127.0.0.1:8090",
        }
    )
    assert (cfg.group_id, cfg.auto_offset_reset, cfg.enable_auto_commit) == (
        "billing",
        "earliest",
        False,
    )
    assert (cfg.max_poll_records, cfg.fetch_max_wait_ms) == (10, 500)
    assert cfg.coordinator_url == "http://127.0.0.1:8090"
    assert ConsumerConfig.from_dict({}).group_id is None
    with pytest.raises(ValueError, match=r"^auto.offset.reset: expected earliest, latest or none"):
        ConsumerConfig.from_dict({"auto.offset.reset": "smallest"})


def test_one_dict_can_configure_every_client() -> None:
    shared = {"bootstrap.servers": "127.0.0.1:8082", "group.id": "g", "acks": "all"}
    assert ProducerConfig.from_dict(shared).acks == -1
    assert ConsumerConfig.from_dict(shared).group_id == "g"
    assert AdminConfig.from_dict(shared).bootstrap_servers == ("http://127.0.0.1:8082",)
    assert len(parse_config(shared)) == len(parse_config({}))


def test_every_setting_is_read_from_its_own_key() -> None:
    common = {"client.id": "c", "request.timeout.ms": 7, "retry.backoff.ms": 9}
    producer = ProducerConfig.from_dict(
        {
            **common,
            "retries": 3,
            "batch.size": 12,
            "delivery.timeout.ms": 13,
            "max.in.flight.requests.per.connection": 4,
            "buffer.memory": 14,
            "max.block.ms": 15,
            "metadata.max.age.ms": 16,
        }
    )
    assert (producer.client_id, producer.request_timeout_ms, producer.retry_backoff_ms) == (
        "c",
        7,
        9,
    )
    assert (producer.retries, producer.batch_size, producer.delivery_timeout_ms) == (3, 12, 13)
    assert (producer.max_in_flight, producer.buffer_memory) == (4, 14)
    assert (producer.max_block_ms, producer.metadata_max_age_ms) == (15, 16)
    consumer = ConsumerConfig.from_dict(
        {
            **common,
            "enable.auto.commit": "false",
            "auto.commit.interval.ms": 17,
            "fetch.max.bytes": 18,
            "max.partition.fetch.bytes": 19,
            "session.timeout.ms": 22,
            "heartbeat.interval.ms": 23,
        }
    )
    assert (consumer.client_id, consumer.request_timeout_ms, consumer.retry_backoff_ms) == (
        "c",
        7,
        9,
    )
    assert (consumer.enable_auto_commit, consumer.auto_commit_interval_ms) == (False, 17)
    assert (consumer.fetch_max_bytes, consumer.max_partition_fetch_bytes) == (18, 19)
    assert (consumer.session_timeout_ms, consumer.heartbeat_interval_ms) == (22, 23)
    admin = AdminConfig.from_dict(common)
    assert (admin.client_id, admin.request_timeout_ms, admin.retry_backoff_ms) == ("c", 7, 9)


def test_security_protocol_and_ssl_files_as_kafka_names_them(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    cfg = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "b1:9093,https://b2:9093",
            "security.protocol": "ssl",
            "ssl.ca.location": str(ca),
        }
    )
    assert cfg.bootstrap_servers == ("https://b1:9093", "https://b2:9093")  # bare host:port
    assert (cfg.security_protocol, cfg.ssl_ca_location) == ("SSL", str(ca))
    assert ProducerConfig.from_dict({}).security_protocol == "PLAINTEXT"
    secured = ProducerConfig.from_dict({"security.protocol": "SSL"})
    assert secured.bootstrap_servers == ("https://127.0.0.1:8082",)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"security.protocol": "TLS"}, "expected one of PLAINTEXT, SSL"),
        ({"security.protocol": "SASL_SSL"}, "needs SASL authentication"),
        ({"security.protocol": "SSL", "bootstrap.servers": "http://b:1"}, "plain HTTP but"),
        ({"security.protocol": "SSL", "coordinator.url": "http://c:1"}, "coordinator.url: http"),
        ({"ssl.ca.location": "/no/such/ca.pem"}, "ssl.ca.location: no such file"),
    ],
)
def test_bad_security_settings_name_the_key(config: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ConsumerConfig.from_dict(config)


def test_a_certificate_needs_its_key(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    with pytest.raises(ValueError, match="go together"):
        AdminConfig.from_dict({"ssl.certificate.location": str(cert)})
