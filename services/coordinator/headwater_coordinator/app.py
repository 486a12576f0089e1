"""``create_app(settings)``: the coordinator's FastAPI app over a :class:`Coordinator` on Redis."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from starlette.responses import Response

from headwater.groups.errors import RETRIABLE, CoordinatorError
from headwater_coordinator.api import groups, membership, models, offsets
from headwater_coordinator.coordinator import Coordinator
from headwater_coordinator.lag_gauges import LagGauges
from headwater_coordinator.metadata import BrokerMetadata
from headwater_coordinator.redis_server import PrivateRedis
from headwater_coordinator.settings import CoordinatorSettings
from headwater_coordinator.store.changes import GroupChanges
from headwater_coordinator.store.connection import connect, probe
from headwater_coordinator.store.groups import GroupStore
from headwater_coordinator.store.keyspace import Keyspace
from headwater_coordinator.store.liveness import Liveness
from headwater_coordinator.store.offsets import OffsetStore
from headwater_kernel.app import create_service_app
from headwater_kernel.errors import error_response
from headwater_kernel.tasks import cancel_and_wait

_DESCRIPTION = (
    "Consumer groups: membership, server-side cooperative assignment and committed offsets, "
    "with all state in Redis."
)


def create_app(
    settings: CoordinatorSettings,
    *,
    broker_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the app; Redis and the background tasks start with the app's lifespan.

    With an empty ``settings.redis_url`` the lifespan starts a private redis-server under
    ``settings.data_dir``, restarts it if it dies or loses its socket, and stops it at shutdown
    (in the lifespan, because uvicorn re-raises SIGTERM after a graceful shutdown, so code after
    ``serve()`` never runs). ``broker_transport`` lets tests reach a broker app in-process.

    While Redis (or every broker, where one is needed) does not answer, requests get 503 with
    their code and ``Retry-After``; nothing needs restarting when it answers again.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            url = settings.redis_url
            if not url:
                private = PrivateRedis(Path(settings.data_dir))
                await asyncio.to_thread(private.start)
                stack.callback(private.stop)
                # Stopped before the server is: a watcher left running would restart it.
                stack.push_async_callback(_cancel, asyncio.create_task(private.keep_running()))
                url = private.url
            app.state.redis_url = url
            await stack.enter_async_context(_serving(app, settings, url, broker_transport))
            yield

    async def ready() -> tuple[bool, dict[str, Any]]:
        try:
            await probe(app.state.redis_url)
        except CoordinatorError as exc:
            return False, {"redis": exc.message}
        return True, {"redis": "ok"}

    app = create_service_app(
        title="Headwater coordinator",
        description=_DESCRIPTION,
        lifespan=lifespan,
        ready=ready,
    )
    for error in RETRIABLE:
        app.add_exception_handler(error, _retry_later)
    app.include_router(membership.router)
    app.include_router(offsets.router)
    app.include_router(groups.router)
    return app


async def _retry_later(request: Request, exc: Exception) -> Response:
    """A transient 503 (Redis or every broker down) tells the client when to try again."""
    assert isinstance(exc, CoordinatorError)
    response = error_response(exc)
    response.headers["Retry-After"] = str(models.RETRY_AFTER_S)
    return response


async def _cancel(task: asyncio.Task[None]) -> None:
    await cancel_and_wait([task])
    with contextlib.suppress(asyncio.CancelledError):
        await task


@contextlib.asynccontextmanager
async def _serving(
    app: FastAPI,
    settings: CoordinatorSettings,
    redis_url: str,
    broker_transport: httpx.AsyncBaseTransport | None,
) -> AsyncIterator[None]:
    """The coordinator on ``redis_url``, with its sweeper, change listener and lag gauges."""
    redis = connect(redis_url)
    keys = Keyspace(settings.key_prefix)
    metadata = BrokerMetadata(settings.broker_urls, transport=broker_transport)
    changes = GroupChanges(redis, keys.changes)
    coordinator = Coordinator(
        group_store=GroupStore(redis, keys, settings.offsets_retention_ms),
        offset_store=OffsetStore(redis, keys, settings.offsets_retention_ms),
        liveness=Liveness(redis, keys),
        metadata=metadata,
        changes=changes,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        sweep_interval_ms=settings.sweep_interval_ms,
    )
    app.state.redis = redis
    app.state.coordinator = coordinator
    tasks = [
        asyncio.create_task(coordinator.run_sweeper()),
        asyncio.create_task(changes.listen()),
    ]
    gauges = LagGauges(coordinator)
    if settings.lag_metrics_interval_ms > 0:
        tasks.append(asyncio.create_task(gauges.run(settings.lag_metrics_interval_ms / 1000)))
    try:
        yield
    finally:
        coordinator.stop_expiring()  # whatever becomes of the sweeper's cancel
        # Bounded: a task stuck in a Redis read must not hold up shutdown.
        await cancel_and_wait(tasks, timeout_s=2)
        gauges.clear()
        await metadata.close()
        await redis.aclose()
