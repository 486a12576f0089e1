"""``create_app(settings)``: the coordinator's FastAPI app over a :class:`Coordinator` on Redis."""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from headwater_kernel.clock import SYSTEM_CLOCK, Clock
from headwater_kernel.errors import error_response
from headwater_kernel.security.tls import client_ssl_context
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.coordinator")

_DESCRIPTION = (
    "Consumer groups: membership, server-side cooperative assignment and committed offsets, "
    "with all state in Redis."
)


def create_app(
    settings: CoordinatorSettings,
    *,
    broker_transport: httpx.AsyncBaseTransport | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> FastAPI:
    """Build the app; Redis and the background tasks start with the app's lifespan.

        With an empty ``settings.redis_url`` the lifespan starts a private redis-server under
        ``settings.data_dir``, restarts it if it dies or loses its socket, and stops it at shutdown
        (in the lifespan, because uvicorn re-raises SIGTERM after a graceful shutdown, so code after
        ``serve()`` never runs). ``broker_transport`` lets tests reach a broker app in-process;
    ``clock`` times the topic metadata cache and the members' sessions (a test moves a
    ``ManualClock`` past a TTL or a session instead of sleeping it out).

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
                watcher = BackgroundTasks(log)
                watcher.spawn(private.keep_running(), "private-redis-watcher")
                stack.push_async_callback(watcher.stop)
                url = private.url
            app.state.redis_url = url
            await stack.enter_async_context(_serving(app, settings, url, broker_transport, clock))
            yield

    async def ready() -> tuple[bool, dict[str, Any]]:
        tasks: BackgroundTasks | None = getattr(app.state, "tasks", None)
        failed = {} if tasks is None else tasks.failed
        try:
            await probe(app.state.redis_url)
        except CoordinatorError as exc:
            return False, {"redis": exc.message, "failed_tasks": failed}
        return not failed, {"redis": "ok", "failed_tasks": failed}

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


@contextlib.asynccontextmanager
async def _serving(
    app: FastAPI,
    settings: CoordinatorSettings,
    redis_url: str,
    broker_transport: httpx.AsyncBaseTransport | None,
    clock: Clock,
) -> AsyncIterator[None]:
    """The coordinator on ``redis_url``, with its sweeper, change listener and lag gauges."""
    redis = connect(redis_url)
    keys = Keyspace(settings.key_prefix)
    metadata = BrokerMetadata(
        settings.broker_urls,
        transport=broker_transport,
        clock=clock,
        ssl_context=client_ssl_context(settings),  # verifies https brokers against its CA
    )
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
        clock=clock,
    )
    app.state.redis = redis
    app.state.coordinator = coordinator
    tasks = BackgroundTasks(log)
    app.state.tasks = tasks
    tasks.spawn(coordinator.run_sweeper(), "coordinator-sweeper")
    tasks.spawn(changes.listen(), "coordinator-change-listener")
    gauges = LagGauges(coordinator)
    if settings.lag_metrics_interval_ms > 0:
        tasks.spawn(gauges.run(settings.lag_metrics_interval_ms / 1000), "coordinator-lag-gauges")
    try:
        yield
    finally:
        coordinator.stop_expiring()  # whatever becomes of the sweeper's cancel
        # Bounded: a task stuck in a Redis read must not hold up shutdown.
        await tasks.stop(timeout_s=2)
        gauges.clear()
        await metadata.close()
        await redis.aclose()
