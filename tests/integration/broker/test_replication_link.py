"""A follower's LeaderLink against real servers on loopback: uvicorn for answers as the broker
sends them, a raw socket server for the broken ones no HTTP server sends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from headwater_broker.replication.link import LeaderLink, LinkError
from tests.integration.broker.in_process import http_server

pytestmark = pytest.mark.anyio

BODY = bytes(range(256)) * 4096  # 1 MiB: many socket reads


@pytest.fixture(params=[False, True], ids=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    """Both event loops: brokers serve (and fetch) under uvloop, whose transports differ."""
    return "asyncio", {"use_uvloop": request.param}


@asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    handlers: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]  # always in a task
        try:
            await answer(reader, writer)
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        # Each handler ends once the link has closed its side (bounded).
        await asyncio.wait_for(asyncio.gather(*handlers), 10)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return await reader.readexactly(length)


async def test_answers_by_length_and_by_chunks_on_one_kept_alive_connection() -> None:
    clients: list[tuple[str, int]] = []

    async def echo(request: Request) -> Response:
        assert request.client is not None
        clients.append((request.client.host, request.client.port))
        body = await request.body()
        assert request.headers["content-type"] == "application/json"
        assert request.headers["accept"] == "application/x-test"
        return Response(body[::-1] + BODY, status_code=200)

    async def chunked(request: Request) -> StreamingResponse:
        assert request.client is not None
        clients.append((request.client.host, request.client.port))
        await request.body()

        async def parts() -> AsyncIterator[bytes]:
            for i in range(0, len(BODY), 100_000):
                yield BODY[i : i + 100_000]

        return StreamingResponse(parts(), status_code=409)

    routes = [Route("/echo", echo, methods=["POST"]), Route("/chunked", chunked, methods=["POST"])]
    async with http_server(Starlette(routes=routes)) as url:
        link = LeaderLink(url)
        try:
            for i in range(3):
                status, body = await link.post(
                    "/echo",
                    b"abc%d" % i,
                    content_type="application/json",
                    accept="application/x-test",
                    timeout_s=5,
                )
                assert (status, body) == (200, b"%dcba" % i + BODY)
            status, body = await link.post(
                "/chunked", b"{}", content_type="application/json", accept="*/*", timeout_s=5
            )
            assert (status, body) == (409, BODY)
        finally:
            await link.aclose()
    assert len(clients) == 4
    assert len(set(clients)) == 1  # every request on the same connection


async def test_a_cancelled_request_closes_the_connection_and_the_next_one_connects_again() -> None:
    clients: list[int] = []
    slow = asyncio.Event()

    async def answer(request: Request) -> Response:
        assert request.client is not None
        clients.append(request.client.port)
        if await request.body() == b"slow":
            await slow.wait()
        return Response(b"ok")

    async with http_server(Starlette(routes=[Route("/", answer, methods=["POST"])])) as url:
        link = LeaderLink(url)
        try:
            pending = asyncio.create_task(
                link.post("/", b"slow", content_type="a/b", accept="*/*", timeout_s=5)
            )
            while not clients:
                await asyncio.sleep(0.01)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            assert not link.connected
            slow.set()
            status, body = await link.post(
                "/", b"fast", content_type="a/b", accept="*/*", timeout_s=5
            )
            assert (status, body) == (200, b"ok")
        finally:
            await link.aclose()
    assert len(clients) == 2
    assert clients[0] != clients[1]


async def test_a_connection_closed_by_the_server_is_an_error_then_reconnected() -> None:
    connections = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        if connections == 1:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
        elif connections == 2:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort")
        else:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n")
            writer.write(b"content-length: 0\r\n\r\n")
        await writer.drain()

    async with raw_server(answer) as url:
        link = LeaderLink(url)
        try:
            assert await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=5) == (
                200,
                b"hi",
            )
            assert not link.connected  # the server said connection: close
            with pytest.raises(LinkError):
                await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=5)
            assert not link.connected
            assert await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=5) == (
                204,
                b"",
            )
        finally:
            await link.aclose()
    assert connections == 3


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",  # neither a length nor chunks
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY",
    ],
)
async def test_a_malformed_answer_is_a_link_error(answer: bytes) -> None:
    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()
        await reader.read()  # until the link gives up on the answer and closes

    async with raw_server(reply) as url:
        link = LeaderLink(url)
        with pytest.raises(LinkError):
            await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=5)
        assert not link.connected
        await link.aclose()


async def test_no_answer_in_time_and_nobody_listening_are_link_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # no answer: until the link gives up and closes

    async with raw_server(silent) as url:
        link = LeaderLink(url)
        with pytest.raises(LinkError, match="no answer"):
            await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=0.2)
        assert not link.connected
    # The server is gone: its port refuses connections.
    with pytest.raises(LinkError):
        await link.post("/", b"x", content_type="a/b", accept="*/*", timeout_s=2)
    await link.aclose()
