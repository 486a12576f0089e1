"""``create_app(settings)``: the coordinator's FastAPI app over a :class:`Coordinator` on Redis."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from redis.asyncio import BlockingConnectionPool, Redis

from headwater_coordinator.api import groups, membership, offsets
from headwater_coordinator.coordinator import Coordinator
from headwater_coordinator.lag_gauges import LagGauges
from headwater_coordinator.metadata import BrokerMetadata
from headwater_coordinator.redis_server import PrivateRedis
from headwater_coordinator.settings import CoordinatorSettings
from headwater_coordinator.store.changes import GroupChanges
from headwater_coordinator.store.groups import GroupStore
from headwater_coordinator.store.keyspace import Keyspace
from headwater_coordinator.store.liveness import Liveness
from headwater_coordinator.store.offsets import OffsetStore
from headwater_kernel.app import create_service_app

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
    ``settings.data_dir`` and stops it at shutdown (in the lifespan, because uvicorn re-raises
    SIGTERM after a graceful shutdown, so code after ``serve()`` never runs).
    ``broker_transport`` lets tests reach a broker app in-process.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            url = settings.redis_url
            if not url:
                private = PrivateRedis(Path(settings.data_dir))
                await asyncio.to_thread(private.start)
                stack.callback(private.stop)
                url = private.url
            await stack.enter_async_context(_serving(app, settings, url, broker_transport))
            yield

    async def ready() -> tuple[bool, dict[str, Any]]:
        try:
            await app.state.redis.ping()
        except Exception as exc:
            return False, {"redis": f"{type(exc).__name__}: {exc}"}
        return True, {"redis": "ok"}

    app = create_service_app(
        title="Headwater coordinator",
        description=_DESCRIPTION,
        lifespan=lifespan,
        ready=ready,
    )
    app.include_router(membership.router)
    app.include_router(offsets.router)
    app.include_router(groups.router)
    return app


@contextlib.asynccontextmanager
async def _serving(
    app: FastAPI,
    settings: CoordinatorSettings,
    redis_url: str,
    broker_transport: httpx.AsyncBaseTransport | None,
) -> AsyncIterator[None]:
    """The coordinator on ``redis_url``, with its sweeper, change listener and lag gauges."""
    # Requests wait for a free connection rather than fail when many arrive at once.
    redis = Redis(connection_pool=BlockingConnectionPool.from_url(redis_url, max_connections=64))
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
    )
    app.state.redis = redis
    app.state.coordinator = coordinator
    tasks = [
        asyncio.create_task(coordinator.run_sweeper(settings.sweep_interval_ms / 1000)),
        asyncio.create_task(changes.listen()),
    ]
    gauges = LagGauges(coordinator)
    if settings.lag_metrics_interval_ms > 0:
        tasks.append(asyncio.create_task(gauges.run(settings.lag_metrics_interval_ms / 1000)))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        # Bounded: a task stuck in a Redis read must not hold up shutdown.
        await asyncio.wait(tasks, timeout=2)
        gauges.clear()
        await metadata.close()
        await redis.aclose()
