"""A follower fetcher's HTTP/1.1 connection to one leader broker, kept alive between fetches.

A fetcher sends one ``POST /replication/fetch`` at a time and reads its whole answer, so it needs
neither a connection pool nor streaming: :class:`LeaderLink` holds one connection and lets h11
(the HTTP/1.1 state machine under httpx and uvicorn) frame the request and parse the answer. A
general-purpose client spends several times more CPU per fetch than this (its pool and its
cancellation scopes run for every request), and a follower fetches again after every answer, so
that cost is paid per replicated batch under ``acks=all`` (docs/cluster.md, "Replication",
performance).

Any failure -- refused or reset connection, timeout, malformed answer -- and a request cancelled
part-way (the fetcher asks again when its partitions change) close the connection, so no answer
is ever read from the middle of another; the next request connects again. Failures are raised
as :class:`LinkError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit

import h11

_READ_SIZE = 1 << 20  # a fetch answer arrives in few, large reads
_MAX_HEAD = 64 * 1024  # status line and headers


class LinkError(Exception):
    """The leader could not be reached, or answered something that is not HTTP/1.1."""


class LeaderLink:
    """One keep-alive HTTP/1.1 connection to ``base_url`` (``http://host:port``)."""

    def __init__(self, base_url: str, *, connect_timeout_s: float = 5.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.tls = parts.scheme == "https"
        self.connect_timeout_s = connect_timeout_s
        self._host = parts.netloc
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._http: h11.Connection | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def post(
        self, path: str, body: bytes, *, content_type: str, accept: str, timeout_s: float
    ) -> tuple[int, bytes]:
        """Send ``body`` and return the answer's status and whole body (LinkError on failure)."""
        done = False
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer, http = await self._connection()
                request = h11.Request(
                    method="POST",
                    target=f"{self.prefix}{path}",
                    headers=[
                        ("host", self._host),
                        ("content-type", content_type),
                        ("accept", accept),
                        ("content-length", str(len(body))),
                    ],
                )
                writer.write(http.send(request) or b"")
                writer.writelines(http.send_with_data_passthrough(h11.Data(data=body)) or ())
                writer.write(http.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                status, answer = await _read_answer(reader, http)
            done = True
        except TimeoutError:
            where = f"{self.host}:{self.port}"
            raise LinkError(f"no answer from {where} within {timeout_s:.1f} s") from None
        except (OSError, h11.ProtocolError) as exc:
            raise LinkError(f"{self.host}:{self.port}: {exc!r}") from None
        finally:
            if not done:
                self._drop()
        if http.our_state is h11.DONE and http.their_state is h11.DONE:
            http.start_next_cycle()  # kept alive for the next fetch
        else:
            self._drop()  # the leader said "connection: close"
        return status, answer

    async def aclose(self) -> None:
        writer = self._writer
        self._drop()
        if writer is not None:
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    # --- internals ------------------------------------------------------------------------------

    async def _connection(
        self,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection]:
        if (
            self._reader is None
            or self._writer is None
            or self._http is None
            or self._reader.at_eof()  # the leader closed the idle connection
        ):
            self._drop()
            async with asyncio.timeout(self.connect_timeout_s):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=ssl.create_default_context() if self.tls else None
                )
            self._http = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        return self._reader, self._writer, self._http

    def _drop(self) -> None:
        writer, self._reader, self._writer, self._http = self._writer, None, None, None
        if writer is not None:
            writer.close()


async def _read_answer(reader: asyncio.StreamReader, http: h11.Connection) -> tuple[int, bytes]:
    """The status and whole body of one answer (a 1xx before it is skipped)."""
    status = 0
    parts: list[bytes] = []
    while True:
        event = http.next_event()
        if event is h11.NEED_DATA:
            http.receive_data(await reader.read(_READ_SIZE))  # b"": the leader closed
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return status, b"".join(parts)
        elif isinstance(event, h11.ConnectionClosed):
            raise LinkError("the leader closed the connection before answering")
        # h11.InformationalResponse (100 Continue): the real answer follows.
