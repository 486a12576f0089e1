"""The request rewrite layer: a %2F stays inside its path segment; JSON-ish bodies are JSON."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote

from starlette.types import Message, Receive, Scope, Send

from headwater_registry.api.rewrite import SLASH, RequestRewrite, SubjectConvertor


def through(scope: dict[str, Any]) -> Scope:
    """The scope the app behind the layer sees."""
    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        raise AssertionError("the layer answers nothing")

    asyncio.run(RequestRewrite(app)(scope, receive, send))
    return seen[0]


def http(method: str, raw_path: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    # As an ASGI server does: ``path`` decoded, ``raw_path`` as received.
    path = unquote(raw_path.split(b"?", 1)[0].decode())
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": raw_path,
        "headers": headers,
    }


def test_an_encoded_slash_stays_in_its_segment_and_the_convertor_restores_it() -> None:
    seen = through(http("GET", b"/subjects/team%2Forders/versions?deleted=true", []))
    assert seen["path"] == f"/subjects/team{SLASH}orders/versions"
    assert SubjectConvertor().convert(f"team{SLASH}orders") == "team/orders"
    assert SubjectConvertor().to_string("team/orders") == f"team{SLASH}orders"
    lower = through(http("GET", b"/config/a%2fb%20c", []))
    assert lower["path"] == f"/config/a{SLASH}b c"


def test_paths_without_an_encoded_slash_are_left_alone() -> None:
    seen = through(http("GET", b"/subjects/a%20b/versions", []))
    assert seen["path"] == "/subjects/a b/versions"


def test_octet_stream_and_missing_bodies_types_become_json_on_writes() -> None:
    octet = [(b"content-type", b"application/octet-stream"), (b"accept", b"*/*")]
    assert through(http("POST", b"/subjects/s/versions", octet))["headers"] == [
        (b"accept", b"*/*"),
        (b"content-type", b"application/json"),
    ]
    assert through(http("PUT", b"/config", []))["headers"] == [
        (b"content-type", b"application/json")
    ]
    vendor = [(b"content-type", b"application/vnd.schemaregistry.v1+json")]
    assert through(http("POST", b"/subjects/s", vendor))["headers"] == vendor
    assert through(http("GET", b"/subjects", []))["headers"] == []
