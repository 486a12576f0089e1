"""``serve``: run a service's app under uvicorn in the foreground, logging through logs.py.

Every service speaks HTTP only. A Kafka wire-protocol client pointed at one (librdkafka, the Java
client, kcat) reconnects every few hundred milliseconds, and uvicorn would log "Invalid HTTP
request received." for each attempt. :class:`HTTPOnlyProtocol` recognises such a client by its
first bytes, closes the connection and says so in one log line per client address (then at debug
level for :data:`REPEAT_WARNING_S`); TLS clients on the plain port are told apart the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.config import STARTUP_FAILURE

from headwater_kernel import logs
from headwater_kernel.security.tls import uvicorn_ssl_options
from headwater_kernel.settings import ServiceSettings

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HTTPProtocol
except ImportError:  # no httptools for this interpreter: uvicorn's pure-Python parser
    from uvicorn.protocols.http.h11_impl import (  # type: ignore[assignment]  # same interface
        H11Protocol as _HTTPProtocol,
    )

log = logging.getLogger("headwater.server")

REPEAT_WARNING_S = 600.0  # a client still misdirected after this is warned about again

# Kafka request header (every API, every version): the frame's size, then the header fields.
#   size            int32   bytes after this field
#   api_key         int16   18 = ApiVersions, the first request of every modern client
#   api_version     int16
#   correlation_id  int32
#   client_id       int16 length (-1 = null) + UTF-8 bytes
_KAFKA_HEADER = struct.Struct(">ihhih")
_KAFKA_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    10: "FindCoordinator",
    17: "SaslHandshake",
    18: "ApiVersions",
    36: "SaslAuthenticate",
}
_TLS_HANDSHAKE = b"\x16\x03"  # record type handshake, protocol major version 3 (SSL 3 .. TLS 1.3)


@dataclass(frozen=True)
class ForeignProtocol:
    """What a connection's first bytes say it speaks, when that is not HTTP."""

    protocol: str  # "Kafka" or "TLS"
    detail: str  # e.g. "ApiVersions v3 request, client id 'rdkafka'"


def foreign_protocol(data: bytes) -> ForeignProtocol | None:
    """Kafka or TLS recognised from a connection's first bytes; None for anything else.

    An HTTP request starts with a method name (ASCII letters), so a leading 0x00 -- the high
    byte of a Kafka frame's size, for any frame under 16 MiB -- is never HTTP.
    """
    if data.startswith(_TLS_HANDSHAKE):
        return ForeignProtocol("TLS", "a TLS handshake (an https:// URL or a TLS-enabled client)")
    if not data.startswith(b"\x00"):
        return None
    if len(data) < _KAFKA_HEADER.size:
        return ForeignProtocol("Kafka", "a binary request")
    _size, api_key, version, _correlation, id_length = _KAFKA_HEADER.unpack_from(data)
    api = _KAFKA_APIS.get(api_key, f"api key {api_key}")
    detail = f"{api} v{version} request"
    start = _KAFKA_HEADER.size
    if 0 <= id_length <= len(data) - start:
        client_id = data[start : start + id_length].decode("utf-8", "replace")
        detail += f", client id {client_id!r}"
    return ForeignProtocol("Kafka", detail)


class _Warnings:
    """When each client address was last warned about, and how many connections since."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[float, int]] = {}

    def report(self, host: str, port: int, found: ForeignProtocol) -> None:
        now = time.monotonic()
        warned_at, quiet = self.last.get(host, (None, 0))
        if warned_at is not None and now - warned_at < REPEAT_WARNING_S:
            self.last[host] = (warned_at, quiet + 1)
            log.debug("closed another %s connection from %s", found.protocol, host)
            return
        self.last[host] = (now, 0)
        since = f" ({quiet} more since the last warning)" if quiet else ""
        if found.protocol == "Kafka":
            advice = (
                "Headwater speaks HTTP only, not the Kafka protocol: use the Headwater SDK, the "
                "headwater CLI or HTTP (REST Proxy v2 shapes)"
            )
        else:
            advice = "this port speaks plain HTTP: use an http:// URL"
        log.warning(
            "closed a %s connection from %s to port %d (%s)%s. %s. Further connections from %s "
            "are logged at debug level for %d minutes.",
            found.protocol,
            host,
            port,
            found.detail,
            since,
            advice,
            host,
            int(REPEAT_WARNING_S // 60),
        )


_warnings = _Warnings()


class HTTPOnlyProtocol(_HTTPProtocol):
    """uvicorn's HTTP protocol, closing a Kafka or TLS connection quietly on its first bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._first_data = True

    def data_received(self, data: bytes) -> None:
        if self._first_data:
            self._first_data = False
            found = foreign_protocol(data)
            if found is not None:
                host = self.client[0] if self.client else "an unknown address"
                port = (self.server[1] if self.server else None) or 0
                _warnings.report(host, port, found)
                self.transport.close()
                return
        super().data_received(data)


Drain = Callable[[], Awaitable[None]]
"""Work to finish while the server still answers requests, once SIGTERM/SIGINT arrives."""


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, which on the first SIGTERM/SIGINT runs ``drain`` while it still
    serves, then shuts down as uvicorn does (a second signal skips the rest of the drain)."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self._drain = drain
        self._draining: asyncio.Task[None] | None = None

    async def on_tick(self, counter: int) -> bool:
        if not await super().on_tick(counter):
            return False
        if self._draining is None:
            self._draining = asyncio.create_task(self._run_drain())
            self.should_exit = False  # keep serving while the drain runs
            return False
        if not self._draining.done():
            self._draining.cancel()  # a second signal: stop now
        return True

    async def _run_drain(self) -> None:
        try:
            await self._drain()
        except asyncio.CancelledError:
            log.warning("shutting down before the drain finished (a second signal)")
        except Exception:
            log.exception("draining before shutdown failed; shutting down anyway")
        self.should_exit = True


def serve(app: FastAPI, settings: ServiceSettings, *, drain: Drain | None = None) -> None:
    """Run an app in the foreground with uvicorn until SIGINT/SIGTERM, logging JSON lines.

    ``drain`` (optional) runs on the first signal while requests are still answered; the
    server stops accepting connections only once it has finished.
    """
    prefix = str(settings.model_config.get("env_prefix") or "")
    logs.configure(settings.log_level, service=prefix.rstrip("_").lower() or app.title)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # None keeps the JSON handler configured above: uvicorn's loggers propagate to it.
        log_config=None,
        # RequestTelemetry writes the access line (with request id) at debug level.
        access_log=False,
        timeout_graceful_shutdown=5,
        http=HTTPOnlyProtocol,
        **uvicorn_ssl_options(settings),
    )
    server = uvicorn.Server(config) if drain is None else _DrainingServer(config, drain)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # as uvicorn.run exits
