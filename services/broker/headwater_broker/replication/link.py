"""A follower fetcher's HTTP/1.1 connection to one leader broker, kept alive between fetches.

A fetcher sends one ``POST /replication/fetch`` at a time and reads its whole answer, so it needs
neither a connection pool nor streaming: :class:`LeaderLink` holds one connection, writes a
request with ``Content-Length`` and reads the answer by its ``Content-Length`` (or chunks). A
general-purpose client spends several times more CPU per fetch than this (its pool, its
cancellation scopes and its parser run for every request and every 64 KiB of body), and a
follower fetches again after every answer, so that cost is paid per replicated batch under
``acks=all`` (docs/cluster.md, "Replication", performance).

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

_MAX_HEADER_LINE = 64 * 1024
_MAX_HEADERS = 100
_READ_LIMIT = 1 << 20  # the stream's buffer: a fetch answer arrives in few, large reads


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
                reader, writer = await self._connection()
                head = (
                    f"POST {self.prefix}{path} HTTP/1.1\r\nhost: {self._host}\r\n"
                    f"content-type: {content_type}\r\naccept: {accept}\r\n"
                    f"content-length: {len(body)}\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + body)
                await writer.drain()
                status, answer, keep_alive = await self._read_answer(reader)
            done = True
        except TimeoutError:
            where = f"{self.host}:{self.port}"
            raise LinkError(f"no answer from {where} within {timeout_s:.1f} s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise LinkError(f"{self.host}:{self.port}: {exc!r}") from None
        finally:
            if not done:
                self._drop()
        if not keep_alive:
            self._drop()
        return status, answer

    async def aclose(self) -> None:
        writer = self._writer
        self._drop()
        if writer is not None:
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    # --- internals ------------------------------------------------------------------------------

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._reader.at_eof():
            self._drop()
            async with asyncio.timeout(self.connect_timeout_s):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=ssl.create_default_context() if self.tls else None,
                    limit=_READ_LIMIT,
                )
        return self._reader, self._writer

    def _drop(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()

    async def _read_answer(self, reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
        while True:
            status, headers = await _read_head(reader)
            if status >= 200:
                break  # a 1xx (100 Continue) is followed by the real answer
        keep_alive = "close" not in headers.get("connection", "").lower()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return status, await _read_chunked(reader), keep_alive
        length = headers.get("content-length")
        if length is None or not length.isdigit():
            raise LinkError(f"answer {status} without a usable content-length: {length!r}")
        return status, await reader.readexactly(int(length)), keep_alive


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readuntil(b"\r\n")
    if len(line) > _MAX_HEADER_LINE:
        raise LinkError(f"answer line of {len(line)} bytes")
    return line[:-2]


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status line and headers (lower-cased names) of one answer."""
    status_line = await _read_line(reader)
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or not code.isdigit():
        raise LinkError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        line = await _read_line(reader)
        if not line:
            return int(code), headers
        name, sep, value = line.partition(b":")
        if not sep:
            raise LinkError(f"malformed header line: {line[:80]!r}")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    raise LinkError(f"more than {_MAX_HEADERS} header lines")


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = (await _read_line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise LinkError(f"bad chunk size {size_line[:20]!r}") from None
        if size == 0:
            while await _read_line(reader):  # trailers, up to the empty line
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise LinkError("chunk not followed by CRLF")
