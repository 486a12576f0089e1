"""Media types the broker speaks, Accept/Content-Type negotiation, and size-limited bodies."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.errors import (
    MalformedRequestError,
    NotAcceptableError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
)
from headwater_broker.api.embedded import EmbeddedFormat
from headwater_kernel.errors import error_response

JSON = "application/json"
KAFKA_JSON = "application/vnd.kafka.json.v2+json"
KAFKA_BINARY = "application/vnd.kafka.binary.v2+json"
KAFKA_V2 = "application/vnd.kafka.v2+json"
BATCHES = "application/vnd.headwater.batches"
OCTET_STREAM = "application/octet-stream"
JSON_BYTES = JSON.encode()

EMBEDDED_FORMATS: dict[str, EmbeddedFormat] = {
    JSON: "json",
    KAFKA_JSON: "json",
    KAFKA_BINARY: "binary",
}
BATCH_TYPES = (BATCHES, OCTET_STREAM)
# What a JSON answer (a success or an error) may be labelled as, in REST Proxy's order of
# preference: its v2 type first, so an Accept that allows anything (none at all, */*, Java's
# default "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2") gets it, as from REST Proxy;
# application/json or an embedded format's type when Accept prefers them.
JSON_ANSWERS = (KAFKA_V2, JSON, KAFKA_JSON, KAFKA_BINARY)
# Paths whose answers are the service kernel's (health, metrics, docs), not REST Proxy's.
KERNEL_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc")


def content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def require_content_type(request: Request, allowed: Sequence[str]) -> str:
    """The request's media type if it is one of ``allowed``; else 415 415."""
    media = content_type(request)
    if media not in allowed:
        raise UnsupportedMediaTypeError(
            f"Content-Type {media or '(none)'!r} is not accepted here; use one of "
            f"{', '.join(allowed)}"
        )
    return media


def negotiate(accept: str | None, offered: Sequence[str]) -> str:
    """The offered type the Accept header prefers (the first offered if there is no header).

    Honors q-values and ``type/*`` / ``*/*`` wildcards (Java's lone ``*`` as ``*/*``); ties go
    to the type offered first; nothing acceptable is 406 406.
    """
    if not accept or not accept.strip():
        return offered[0]
    best: tuple[float, int, int] | None = None
    chosen = None
    for order, item in enumerate(accept.split(",")):
        parts = [p.strip() for p in item.split(";")]
        media = parts[0].lower()
        if media == "*":  # what Java's HttpURLConnection sends for "anything"
            media = "*/*"
        q = 1.0
        for param in parts[1:]:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        if q <= 0:
            continue
        for rank, candidate in enumerate(offered):
            main, _, _sub = candidate.partition("/")
            if media in (candidate, "*/*", f"{main}/*"):
                specificity = 2 if media == candidate else 0 if media == "*/*" else 1
                key = (q, specificity, -order * 100 - rank)
                if best is None or key > best:
                    best, chosen = key, candidate
    if chosen is None:
        raise NotAcceptableError(
            f"Cannot answer with any of Accept: {accept!r}; available: {', '.join(offered)}"
        )
    return chosen


def accept_json(request: Request) -> str:
    """Media type of a JSON answer to this request (406 406 if Accept allows none)."""
    return negotiate(request.headers.get("accept"), JSON_ANSWERS)


def json_label(accept: str | None) -> str:
    """The media type of a JSON answer whatever Accept says: errors are answered even when
    Accept allows no JSON type (a 406 itself, a fetch asking for raw batches only)."""
    try:
        return negotiate(accept, JSON_ANSWERS)
    except NotAcceptableError:
        return KAFKA_V2


class NegotiatedJSON:
    """ASGI middleware: label every JSON answer of the REST routes as Accept asks.

    Routes and the error handlers answer ``application/json`` unless they chose a type
    themselves (a fetch in an embedded format, raw batches); this relabels those answers with
    :func:`json_label`, so successes and errors of every route, and 404/405 for unknown paths,
    are negotiated the same way. The kernel's own routes (health, metrics, docs) keep theirs.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(KERNEL_PATHS):
            await self.app(scope, receive, send)
            return
        accept = None
        for name, value in scope.get("headers", ()):
            if name == b"accept":
                accept = value.decode("latin-1")
                break
        label = json_label(accept).encode()

        async def relabel(message: Message) -> None:
            if message["type"] == "http.response.start" and label != JSON_BYTES:
                message["headers"] = [
                    (name, label if name == b"content-type" and value == JSON_BYTES else value)
                    for name, value in message.get("headers", ())
                ]
            await send(message)

        await self.app(scope, receive, relabel)


async def read_body(request: Request, limit: int) -> bytearray:
    """The whole body in one mutable buffer, never holding more than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise MalformedRequestError(f"Invalid Content-Length {declared!r}") from None
        if size > limit:
            raise RequestTooLargeError(
                f"Request body of {size} bytes exceeds the {limit}-byte limit"
            )
        buf = bytearray(size)
        pos = 0
        async for chunk in request.stream():
            end = pos + len(chunk)
            if end > size:
                raise MalformedRequestError("Request body is longer than its Content-Length")
            buf[pos:end] = chunk
            pos = end
        if pos != size:
            raise MalformedRequestError(
                f"Request body ended after {pos} of {size} bytes (Content-Length)"
            )
        return buf
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestTooLargeError(f"Request body exceeds the {limit}-byte limit")
    return body


class BodyLimit:
    """ASGI middleware: refuse bodies over ``limit`` bytes, by Content-Length or while streaming.

    Routes that let FastAPI parse JSON bodies are covered too: the receive channel raises
    RequestTooLargeError (413 41301) once more than ``limit`` bytes have arrived.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                error = RequestTooLargeError(
                    f"Request body of {int(value)} bytes exceeds the {limit}-byte limit"
                )
                await error_response(error)(scope, receive, send)
                return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestTooLargeError(f"Request body exceeds the {limit}-byte limit")
            return message

        await self.app(scope, limited, send)
