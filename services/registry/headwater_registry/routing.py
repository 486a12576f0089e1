"""ASGI middleware: subjects holding ``/``, bodies under any JSON-ish media type, cached id reads.

Clients percent-encode ``/`` in a subject as ``%2F``; the ASGI server decodes the path before
routing, which would split ``a%2Fb`` into two segments. The middleware rebuilds the path from
``raw_path``, decoding each segment on its own and standing :data:`SLASH` in for a decoded ``/``;
the ``Subject`` path dependency in ``app.py`` turns it back.

Confluent accepts request bodies as ``application/octet-stream`` (and with no content type) and
reads them as JSON; the middleware labels such requests ``application/json`` so FastAPI parses and
validates the body the same way.

``GET /schemas/ids/{id}`` -- what every deserializer calls -- and ``GET /schemas/ids/{id}/schema``
are answered here when the id's rendered body is already cached (ids are immutable), skipping
FastAPI's routing and dependency resolution, which cost several times the rest of the request. A
miss falls through to the route, which fills the cache. The matched route is put in the scope, as
the telemetry middleware outside reads its template from there.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

SLASH = "\uf8ff"
"""A private-use code point standing in for ``/`` inside one path segment while routing."""

_JSON_ALIASES = (b"application/octet-stream", b"")
_SCHEMA_BY_ID = re.compile(r"/schemas/ids/(\d{1,10})(/schema)?")
SCHEMA_BY_ID_ROUTES = ("/schemas/ids/{id}", "/schemas/ids/{id}/schema")


class RegistryRouting:
    def __init__(self, app: ASGIApp, media_type: str) -> None:
        self.app = app
        self.headers = [(b"content-type", media_type.encode())]
        self.routes: tuple[Any, Any] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope["method"] == "GET" and await self._cached_schema(scope, send):
                return
            self._rewrite(scope)
        await self.app(scope, receive, send)

    async def _cached_schema(self, scope: Scope, send: Send) -> bool:
        match = _SCHEMA_BY_ID.fullmatch(scope["path"])
        if match is None:
            return False
        text_only = match[2] is not None
        registry = scope["app"].state.registry
        body: bytes | None = registry.cached_schema_body(int(match[1]), text_only)
        if body is None:
            return False
        if self.routes is None:
            by_path = {getattr(r, "path", ""): r for r in scope["app"].routes}
            self.routes = (by_path[SCHEMA_BY_ID_ROUTES[0]], by_path[SCHEMA_BY_ID_ROUTES[1]])
        scope["route"] = self.routes[text_only]
        headers = [*self.headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return True

    @staticmethod
    def _rewrite(scope: Scope) -> None:
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
        scope.update(changes)
