"""ASGI middleware that lets subjects hold ``/`` and bodies arrive under any JSON-ish media type.

Clients percent-encode ``/`` in a subject as ``%2F``; the ASGI server decodes the path before
routing, which would split ``a%2Fb`` into two segments. The middleware rebuilds the path from
``raw_path``, decoding each segment on its own and standing :data:`SLASH` in for a decoded ``/``;
the ``Subject`` path dependency in ``app.py`` turns it back.

Confluent accepts request bodies as ``application/octet-stream`` (and with no content type) and
reads them as JSON; the middleware labels such requests ``application/json`` so FastAPI parses and
validates the body the same way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

SLASH = "\uf8ff"
"""A private-use code point standing in for ``/`` inside one path segment while routing."""

_JSON_ALIASES = (b"application/octet-stream", b"")


class RegistryRouting:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = self._rewrite(scope)
        await self.app(scope, receive, send)

    @staticmethod
    def _rewrite(scope: Scope) -> Scope:
        changes: dict[str, Any] = {}
        raw: bytes = scope.get("raw_path") or b""
        raw = raw.split(b"?", 1)[0]
        if b"%2f" in raw.lower():
            segments = raw.decode("latin-1").split("/")
            decoded = [unquote(s, errors="replace").replace("/", SLASH) for s in segments]
            changes["path"] = "/".join(decoded)
        if scope["method"] in ("POST", "PUT"):
            headers = list(scope["headers"])
            types = [v for k, v in headers if k == b"content-type"]
            if not types or types[0].split(b";")[0].strip().lower() in _JSON_ALIASES:
                headers = [(k, v) for k, v in headers if k != b"content-type"]
                headers.append((b"content-type", b"application/json"))
                changes["headers"] = headers
        return {**scope, **changes} if changes else scope
