"""A follower fetcher's HTTP/1.1 connection to one leader broker, kept alive between fetches.

A fetcher sends one ``POST /replication/fetch`` at a time and reads its whole answer, so it needs
neither a connection pool nor streaming: :class:`LeaderLink` holds one connection as an asyncio
protocol and lets httptools (the C HTTP parser uvicorn serves with) parse each answer as its
bytes arrive. A general-purpose client spends several times more CPU per fetch than this (its
pool, its cancellation scopes and its buffered stream reader copy each answer several times),
and a follower fetches again after every answer, so that cost is paid per replicated batch
under ``acks=all`` (docs/cluster.md, "Replication", performance). Here an answer's bytes are
copied once after the socket read: into the body the follower appends from (the replica-fetch
decoder slices it without copying).

Any failure -- refused or reset connection, timeout, malformed answer, an answer whose length
is neither declared nor chunked -- and a request cancelled part-way (the fetcher asks again when
its partitions change) close the connection, so no answer is ever read from the middle of
another; the next request connects again. Failures are raised as :class:`LinkError`.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast
from urllib.parse import urlsplit

import httptools


class LinkError(Exception):
    """The leader could not be reached, or answered something that is not HTTP/1.1."""


class LeaderLink:
    """One keep-alive HTTP/1.1 connection to ``base_url`` (``http://host:port``)."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.tls = parts.scheme == "https"
        # https: the broker's client context (its CA, its own certificate), else the system's.
        self._ssl = (ssl_context or ssl.create_default_context()) if self.tls else None
        self.connect_timeout_s = connect_timeout_s
        self._host = parts.netloc
        self._connection: _AnswerReader | None = None

    @property
    def connected(self) -> bool:
        return self._connection is not None

    async def post(
        self, path: str, body: bytes, *, content_type: str, accept: str, timeout_s: float
    ) -> tuple[int, bytes]:
        """Send ``body`` and return the answer's status and whole body (LinkError on failure)."""
        done = False
        try:
            async with asyncio.timeout(timeout_s):
                connection = await self._connect()
                head = (
                    f"POST {self.prefix}{path} HTTP/1.1\r\nhost: {self._host}\r\n"
                    f"content-type: {content_type}\r\naccept: {accept}\r\n"
                    f"content-length: {len(body)}\r\n\r\n"
                )
                status, answer, keep_alive = await connection.exchange(head.encode("latin-1"), body)
            done = True
        except TimeoutError:
            where = f"{self.host}:{self.port}"
            raise LinkError(f"no answer from {where} within {timeout_s:.1f} s") from None
        except OSError as exc:
            raise LinkError(f"{self.host}:{self.port}: {exc!r}") from None
        finally:
            if not done:
                self._drop()
        if not keep_alive:
            self._drop()  # the leader said "connection: close"
        return status, answer

    async def aclose(self) -> None:
        connection = self._connection
        self._drop()
        if connection is not None:
            await connection.closed()

    # --- internals ------------------------------------------------------------------------------

    async def _connect(self) -> _AnswerReader:
        connection = self._connection
        if connection is None or connection.lost:  # e.g. the leader closed an idle connection
            self._drop()
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(self.connect_timeout_s):
                _transport, connection = await loop.create_connection(
                    lambda: _AnswerReader(f"{self.host}:{self.port}"),
                    self.host,
                    self.port,
                    ssl=self._ssl,
                )
            self._connection = connection
        return connection

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class _AnswerReader(asyncio.Protocol):
    """One connection: writes a request, parses its answer with httptools as bytes arrive.

    The parser's callbacks (``on_*``) collect the answer; :meth:`exchange` waits for the whole
    message. Anything arriving while no request is out, and any parse error, fails the
    connection.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.lost = False
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._parts: list[bytes] = []
        self._delimited = False

    async def exchange(self, head: bytes, body: bytes) -> tuple[int, bytes, bool]:
        """Send one request; its answer's (status, body, keep-alive)."""
        transport = self._transport
        if transport is None or self.lost:
            raise ConnectionResetError("the connection is closed")
        self._answer = asyncio.get_running_loop().create_future()
        self._parts = []
        transport.writelines((head, body))
        try:
            return await self._answer
        finally:
            self._answer = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def closed(self) -> None:
        await asyncio.shield(self._closed)

    # --- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (asyncio's own or uvloop's, which does not subclass it).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():
            self._fail(LinkError(f"{self.where} sent {len(data)} bytes nobody asked for"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(LinkError(f"{self.where}: not an HTTP/1.1 answer: {exc}"))

    def eof_received(self) -> bool | None:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._fail(
            LinkError(
                f"{self.where} closed the connection before answering"
                + (f": {exc!r}" if exc is not None else "")
            )
        )
        if not self._closed.done():
            self._closed.set_result(None)

    def _fail(self, error: LinkError) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(error)
        self.close()

    # --- httptools callbacks --------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._parts = []
        self._delimited = False

    def on_header(self, name: bytes, _value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._delimited = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status >= 200 and not self._delimited and status not in (204, 304):
            # A body delimited only by closing the connection: never what a broker sends.
            raise httptools.HttpParserError("an answer with neither a length nor chunks")

    def on_body(self, body: bytes) -> None:
        self._parts.append(body)

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # 100 Continue and the like: the real answer follows
        answer = self._answer
        if answer is not None and not answer.done():
            parts = self._parts
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            answer.set_result((status, body, self._parser.should_keep_alive()))
        self._parts = []
