"""The coordinator's HTTP routes: thin wrappers over :class:`Coordinator`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Request, Response
from redis.asyncio import BlockingConnectionPool, Redis

from headwater_coordinator.coordinator import Coordinator
from headwater_coordinator.lag_gauges import LagGauges
from headwater_coordinator.metadata import BrokerMetadata
from headwater_coordinator.models import (
    CommitBody,
    GroupDescription,
    GroupLag,
    GroupOffsets,
    GroupSummary,
    HeartbeatBody,
    HeartbeatResponse,
    ResetBody,
)
from headwater_coordinator.redis_server import PrivateRedis
from headwater_coordinator.settings import CoordinatorSettings
from headwater_coordinator.store import GroupChanges, GroupStore
from headwater_kernel.app import create_service_app


async def _coordinator(request: Request) -> Coordinator:
    # async: FastAPI would run a plain def dependency in a worker thread on every request
    coordinator: Coordinator = request.app.state.coordinator
    return coordinator


CoordinatorDep = Annotated[Coordinator, Depends(_coordinator)]


def create_app(
    settings: CoordinatorSettings,
    *,
    broker_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the app; Redis and the sweeper start with the app's lifespan.

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
            await stack.enter_async_context(serving(app, url))
            yield

    @contextlib.asynccontextmanager
    async def serving(app: FastAPI, url: str) -> AsyncIterator[None]:
        # Requests wait for a free connection rather than fail when many arrive at once.
        redis = Redis(connection_pool=BlockingConnectionPool.from_url(url, max_connections=64))
        metadata = BrokerMetadata(settings.broker_urls, transport=broker_transport)
        store = GroupStore(redis, settings.key_prefix, settings.offsets_retention_ms)
        changes = GroupChanges(redis, store.changes_channel)
        coordinator = Coordinator(
            store,
            metadata,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            changes=changes,
        )
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

    async def ready() -> tuple[bool, dict[str, Any]]:
        try:
            await app.state.coordinator.store.redis.ping()
        except Exception as exc:
            return False, {"redis": f"{type(exc).__name__}: {exc}"}
        return True, {"redis": "ok"}

    app = create_service_app(
        title="Headwater coordinator",
        description="Consumer groups: membership, server-side cooperative assignment and "
        "committed offsets, with all state in Redis.",
        lifespan=lifespan,
        ready=ready,
    )

    @app.post(
        "/groups/{group_id}/heartbeat",
        response_model=HeartbeatResponse,
        tags=["membership"],
        summary="Join (epoch 0), heartbeat and reconcile, or leave (-1, static -2)",
    )
    async def heartbeat(group_id: str, body: HeartbeatBody, c: CoordinatorDep) -> HeartbeatResponse:
        return await c.heartbeat(group_id, body)

    @app.post(
        "/groups/{group_id}/offsets",
        status_code=204,
        tags=["offsets"],
        summary="Commit offsets (the owner at its epoch, or any client for an empty group)",
    )
    async def commit(group_id: str, body: CommitBody, c: CoordinatorDep) -> Response:
        await c.commit(group_id, body)
        return Response(status_code=204)

    @app.get(
        "/groups/{group_id}/offsets",
        response_model=GroupOffsets,
        tags=["offsets"],
        summary="Committed offsets of a group",
    )
    async def offsets(group_id: str, c: CoordinatorDep) -> GroupOffsets:
        return await c.offsets(group_id)

    @app.post(
        "/groups/{group_id}/offsets/reset",
        response_model=GroupOffsets,
        tags=["offsets"],
        summary="Reset offsets of a group without members",
    )
    async def reset(group_id: str, body: ResetBody, c: CoordinatorDep) -> GroupOffsets:
        return await c.reset(group_id, body)

    @app.get("/groups", response_model=list[GroupSummary], tags=["admin"], summary="List groups")
    async def list_groups(c: CoordinatorDep) -> list[GroupSummary]:
        return await c.list_groups()

    @app.get(
        "/groups/{group_id}",
        response_model=GroupDescription,
        tags=["admin"],
        summary="State, epochs, members and assignment of a group",
    )
    async def describe(group_id: str, c: CoordinatorDep) -> GroupDescription:
        return await c.describe(group_id)

    @app.get(
        "/groups/{group_id}/lag",
        response_model=GroupLag,
        tags=["admin"],
        summary="Committed offsets against the brokers' end offsets",
    )
    async def lag(group_id: str, c: CoordinatorDep) -> GroupLag:
        return await c.lag(group_id)

    @app.delete(
        "/groups/{group_id}",
        status_code=204,
        tags=["admin"],
        summary="Delete a group without members, with its offsets",
    )
    async def delete(group_id: str, c: CoordinatorDep) -> Response:
        await c.delete(group_id)
        return Response(status_code=204)

    return app
