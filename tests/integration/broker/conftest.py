"""Fixtures of the broker's integration tests: they run on asyncio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.integration.broker.in_process import shared_broker


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shared_broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One broker app for the module (its own thread and loop, on a loopback port)."""
    with shared_broker(tmp_path_factory.mktemp("shared-broker")) as url:
        yield url


@pytest.fixture
async def client(shared_broker_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the module's shared broker: for tests that need only its HTTP API and
    topics of their own."""
    async with httpx.AsyncClient(base_url=shared_broker_url, timeout=30) as http:
        yield http
