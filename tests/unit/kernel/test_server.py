"""A Kafka or TLS client on an HTTP port is recognised by its first bytes and logged once."""

from __future__ import annotations

import logging
import struct
import time

import pytest

from headwater_kernel import server
from headwater_kernel.server import ForeignProtocol, foreign_protocol


def kafka_request(api_key: int, version: int, client_id: str | None) -> bytes:
    """A Kafka request header as a client sends it (a request body may follow)."""
    encoded = b"" if client_id is None else client_id.encode()
    length = -1 if client_id is None else len(encoded)
    header = struct.pack(">hhih", api_key, version, 1, length) + encoded + b"\x00"
    return struct.pack(">i", len(header)) + header


def test_an_api_versions_request_is_kafka_with_its_client_id() -> None:
    found = foreign_protocol(kafka_request(18, 3, "rdkafka"))
    assert found == ForeignProtocol("Kafka", "ApiVersions v3 request, client id 'rdkafka'")


def test_other_kafka_requests_and_fragments_are_kafka_too() -> None:
    assert foreign_protocol(kafka_request(3, 12, None)) == ForeignProtocol(
        "Kafka", "Metadata v12 request"
    )
    assert foreign_protocol(kafka_request(77, 0, "x")) == ForeignProtocol(
        "Kafka", "api key 77 v0 request, client id 'x'"
    )
    assert foreign_protocol(b"\x00\x00\x00") == ForeignProtocol("Kafka", "a binary request")


def test_http_requests_are_left_to_http() -> None:
    for start in (b"GET /healthz HTTP/1.1\r\n", b"POST /topics HTTP/1.1\r\n", b"P", b""):
        assert foreign_protocol(start) is None


def test_a_tls_handshake_is_recognised() -> None:
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
    assert foreign_protocol(hello) is not None
    assert foreign_protocol(hello) == ForeignProtocol(
        "TLS", "a TLS handshake (an https:// URL or a TLS-enabled client)"
    )


def test_one_warning_per_client_address_then_debug_lines(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    warnings = server._Warnings()
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    kafka = ForeignProtocol("Kafka", "ApiVersions v3 request, client id 'rdkafka'")
    with caplog.at_level(logging.DEBUG, logger="headwater.server"):
        for _ in range(78):  # what librdkafka sent in four seconds
            warnings.report("10.0.0.7", 8082, kafka)
        warnings.report("10.0.0.8", 8082, kafka)
        clock[0] += server.REPEAT_WARNING_S
        warnings.report("10.0.0.7", 8082, kafka)
    levels = [(r.levelname, r.getMessage()) for r in caplog.records]
    warned = [message for level, message in levels if level == "WARNING"]
    assert len(warned) == 3
    assert warned[0] == (
        "closed a Kafka connection from 10.0.0.7 to port 8082 (ApiVersions v3 request, client id "
        "'rdkafka'). Headwater speaks HTTP only, not the Kafka protocol: use the Headwater SDK, "
        "the headwater CLI or HTTP (REST Proxy v2 shapes). Further connections from 10.0.0.7 are "
        "logged at debug level for 10 minutes."
    )
    assert warned[1].startswith("closed a Kafka connection from 10.0.0.8 ")
    assert warned[2].startswith(
        "closed a Kafka connection from 10.0.0.7 to port 8082 (ApiVersions v3 request, client id "
        "'rdkafka') (77 more since the last warning). "
    )
    assert sum(level == "DEBUG" for level, _ in levels) == 77
