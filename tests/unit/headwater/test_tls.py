"""The SDK's HTTP clients share one verifying TLS context per process."""

from __future__ import annotations

import ssl

from headwater.client.broker import BrokerClient
from headwater.client.tls import shared_ssl_context
from headwater.registry.client import SchemaRegistryClient


def test_one_verifying_context_is_made_once_and_shared() -> None:
    context = shared_ssl_context()
    assert context is shared_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    with (
        BrokerClient("https://127.0.0.1:1") as broker,
        SchemaRegistryClient("https://127.0.0.1:1") as registry,
    ):
        for client in (broker._http, registry._http):
            pool = client._transport._pool  # type: ignore[attr-defined]  # httpx internals
            assert pool._ssl_context is context
