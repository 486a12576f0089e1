"""ASGI layer that rewrites requests before routing: subjects holding ``/``, JSON-ish bodies.

It answers nothing; every answer comes from a route.

Clients percent-encode ``/`` in a subject as ``%2F``; the ASGI server decodes the path before
routing, which would split ``a%2Fb`` into two segments. The layer rebuilds the path from
``raw_path``, decoding each segment on its own and standing :data:`SLASH` in for a decoded ``/``;
the ``{subject:subject}`` path convertor turns it back.

Confluent accepts request bodies as ``application/octet-stream`` (and with no content type) and
reads them as JSON; the layer labels such requests ``application/json`` so FastAPI parses and
validates the body the same way.
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.convertors import Convertor
from starlette.types import ASGIApp, Receive, Scope, Send

SLASH = "\uf8ff"
"""A private-use code point standing in for ``/`` inside one path segment while routing."""

_JSON_ALIASES = (b"application/octet-stream", b"")


class SubjectConvertor(Convertor[str]):
    """``{subject:subject}``: one path segment, with the ``%2F`` stand-in turned back into ``/``."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return value.replace(SLASH, "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", SLASH)


class RequestRewrite:
    """Pure ASGI middleware: the two rewrites above, on the scope, then the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            _rewrite(scope)
        await self.app(scope, receive, send)


def _rewrite(scope: Scope) -> None:
    raw: bytes = scope.get("raw_path") or b""
    # Some clients' raw_path carries the query string too; an escaped "/" can only be in the path.
    if b"%" in raw:
        path = raw.split(b"?", 1)[0]
        if b"%2f" in path.lower():
            segments = path.decode("latin-1").split("/")
            decoded = [unquote(s, errors="replace").replace("/", SLASH) for s in segments]
            scope["path"] = "/".join(decoded)
    if scope["method"] in ("POST", "PUT"):
        headers = list(scope["headers"])
        types = [v for k, v in headers if k == b"content-type"]
        if not types or types[0].split(b";")[0].strip().lower() in _JSON_ALIASES:
            headers = [(k, v) for k, v in headers if k != b"content-type"]
            headers.append((b"content-type", b"application/json"))
            scope["headers"] = headers
