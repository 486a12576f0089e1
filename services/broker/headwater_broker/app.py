"""``create_app(settings)``: the broker's FastAPI app over a :class:`Broker` on its data dir."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from headwater.errors import HeadwaterError, InvalidOffsetError, InvalidRequestError
from headwater_broker.api import fetch, openapi, produce, topics
from headwater_broker.api.media import BodyLimit, NegotiatedJSON
from headwater_broker.broker import Broker
from headwater_broker.settings import BrokerSettings
from headwater_kernel.app import create_service_app

_DESCRIPTION = """\
Durable partitioned logs of Kafka RecordBatch v2 over HTTP: topic admin, REST Proxy v2 produce,
a raw batch fast path with idempotent producers, and stateless fetch by offset with long-poll.
Errors are `{"error_code", "message"}`.
"""


def _validation_error(message: str) -> HeadwaterError:
    """Bad offsets get 40004 (as the API documents); other malformed parameters 42200."""
    if message.startswith("query.offset") or message.startswith("query.max_"):
        return InvalidOffsetError(message)
    return InvalidRequestError(message)


def create_app(settings: BrokerSettings) -> FastAPI:
    """A broker app; its storage opens (with crash recovery) when the app starts."""
    broker = Broker(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        broker.open()
        await broker.start()
        try:
            yield
        finally:
            await broker.close()

    async def ready() -> tuple[bool, dict[str, Any]]:
        return broker.ready()

    app = create_service_app(
        title="Headwater broker",
        description=_DESCRIPTION,
        lifespan=lifespan,
        ready=ready,
        validation_error=_validation_error,
    )
    app.state.broker = broker
    app.state.settings = settings
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes)
    app.add_middleware(NegotiatedJSON)  # outside BodyLimit: its 413s are negotiated too
    app.include_router(topics.router)
    app.include_router(produce.router)
    app.include_router(fetch.router)
    app.openapi = lambda: openapi.document(app)  # type: ignore[method-assign]
    return app
