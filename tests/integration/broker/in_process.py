"""A broker app in this process, reached through httpx's ASGI transport; one broker shared by a
whole test module; and the media types the broker's integration tests send it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

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


@asynccontextmanager
async def http_server(app: ASGIApp) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a loopback port of its own; yields its base URL.

    log_config=None and no log_level: uvicorn leaves the process's logging as the tests set it
    (its defaults would stop "uvicorn" propagating and raise "uvicorn.error" to WARNING). A long
    poll still parked when the test ends is not waited out (timeout_graceful_shutdown=1).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


@contextmanager
def shared_broker(data_dir: Path, **settings: Any) -> Iterator[str]:
    """A broker app served on a loopback port from a thread and event loop of its own, for
    every test of a module that needs only its HTTP API (each test uses topics of its own); yields
    its base URL. One start per module instead of one per test."""
    ready = threading.Event()
    stop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    urls: list[str] = []
    failures: list[BaseException] = []

    async def serve() -> None:
        stop.append((asyncio.get_running_loop(), asyncio.Event()))
        app = create_app(BrokerSettings(data_dir=str(data_dir), **settings))
        async with app.router.lifespan_context(app), http_server(app) as url:
            urls.append(url)
            ready.set()
            await stop[0][1].wait()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported to the test that waits for it
            failures.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="shared-broker", daemon=True)
    thread.start()
    ready.wait(60)
    if failures or not urls:
        raise RuntimeError(f"the shared broker did not start: {failures}")
    try:
        yield urls[0]
    finally:
        loop, stopping = stop[0]
        loop.call_soon_threadsafe(stopping.set)
        thread.join(30)
