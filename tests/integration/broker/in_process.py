"""A broker app in this process, reached through httpx's ASGI transport, and the media types the
broker's integration tests send it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from headwater_broker.app import create_app
from headwater_broker.broker import Broker
from headwater_broker.settings import BrokerSettings

BATCHES = "application/vnd.headwater.batches"
KAFKA_JSON = "application/vnd.kafka.json.v2+json"
KAFKA_BINARY = "application/vnd.kafka.binary.v2+json"


@asynccontextmanager
async def broker_app(
    data_dir: Path, **settings: Any
) -> AsyncIterator[tuple[Broker, httpx.AsyncClient]]:
    """The broker (started, as by the app's lifespan) over ``data_dir`` and a client of its app."""
    app = create_app(BrokerSettings(data_dir=str(data_dir), **settings))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
            yield app.state.broker, client


@asynccontextmanager
async def broker(data_dir: Path, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a broker app over ``data_dir``, for tests that need only its HTTP API."""
    async with broker_app(data_dir, **settings) as (_domain, client):
        yield client
