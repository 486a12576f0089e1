"""``create_app(settings)``: the broker's FastAPI app over a :class:`Broker` on its data dir."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response

from headwater.errors import (
    BrokerError,
    HeadwaterError,
    InvalidOffsetError,
    InvalidRequestError,
    ServiceUnavailableError,
)
from headwater_broker.api import cluster, fetch, models, openapi, produce, replication, topics
from headwater_broker.api.media import BodyLimit, NegotiatedJSON
from headwater_broker.broker import Broker
from headwater_broker.settings import BrokerSettings
from headwater_kernel.app import create_service_app
from headwater_kernel.errors import error_response
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker")

_DESCRIPTION = """\
Durable partitioned logs of Kafka RecordBatch v2 over HTTP, served by brokers that form one
cluster: topic admin (carried out by the controller, at any broker), REST Proxy v2 produce and
JSON fetch at any broker (relayed to the partition's leader), a raw batch fast path and raw
fetch at the leader only (421 42101 elsewhere, naming the leader), idempotent producers with
cluster-wide ids, and `GET /cluster`. Errors are `{"error_code", "message"}`; 503s carry
`Retry-After`.
"""


def _validation_error(message: str) -> HeadwaterError:
    """Bad offsets get 40004 (as the API documents); other malformed parameters 42200."""
    if message.startswith("query.offset") or message.startswith("query.max_"):
        return InvalidOffsetError(message)
    return InvalidRequestError(message)


def create_app(
    settings: BrokerSettings, *, on_replaced: Callable[[], None] | None = None
) -> FastAPI:
    """A broker app; it joins its cluster and opens its replicas when the app starts.

    ``on_replaced`` is called when another process took this broker id over: the broker has
    stopped serving by then (``python -m headwater_broker`` exits non-zero).
    """
    broker = Broker(settings)

    async def watch_replaced() -> None:
        await broker.node.replaced.wait()
        log.error("broker %d was replaced by another process; it stops serving", broker.broker_id)
        broker.is_open = False
        await broker.close()  # logs closed cleanly; the cluster is not touched (replaced)
        if on_replaced is not None:
            on_replaced()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        broker.open()
        await broker.start()
        watcher = BackgroundTasks(log)
        watcher.spawn(watch_replaced(), "replaced-watcher")
        try:
            yield
        finally:
            await watcher.stop()
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
    # Outermost of the broker's own: follower fetches skip the REST routing and middlewares.
    app.add_middleware(replication.ReplicaFetchPath, broker=broker)
    app.add_exception_handler(BrokerError, _broker_error)
    app.add_exception_handler(ServiceUnavailableError, _broker_error)
    app.include_router(cluster.router)
    app.include_router(topics.router)
    app.include_router(produce.router)
    app.include_router(fetch.router)
    app.include_router(replication.router)
    app.openapi = lambda: openapi.document(app)  # type: ignore[method-assign]
    return app


async def _broker_error(request: Request, exc: Exception) -> Response:
    """Every error's body; a 503 (no leader, no controller, store down) says when to retry."""
    assert isinstance(exc, HeadwaterError)
    response = error_response(exc)
    if exc.http_status == 503:
        response.headers["Retry-After"] = str(models.RETRY_AFTER_S)
    return response
