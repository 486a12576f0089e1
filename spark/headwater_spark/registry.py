"""Schemas for the validation job, from the registry through the SDK's cached client.

Used on the driver (the expected schema of a subject) and on every executor (writer schemas by
id). The SDK's :class:`~headwater.registry.client.SchemaRegistryClient` caches schemas by id (ids
are immutable); one client per registry URL is kept at module level, so a Python worker that
Spark reuses across tasks keeps its cache.
"""

from __future__ import annotations

import threading

from headwater.registry.client import RegisteredSchema, SchemaRegistryClient
from headwater.registry.errors import SchemaNotFoundError

__all__ = ["RegisteredSchema", "SchemaRegistry"]

_clients: dict[str, SchemaRegistryClient] = {}
_lock = threading.Lock()


class SchemaRegistry:
    """The two reads the job makes: a schema by id (None when unknown) and a subject version."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        with _lock:
            client = _clients.get(self.url)
            if client is None:
                client = _clients[self.url] = SchemaRegistryClient(self.url)
        self._client = client

    @property
    def client(self) -> SchemaRegistryClient:
        """The SDK client behind this view (shared per URL, caching schemas by id)."""
        return self._client

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this global id, or None when the registry has none (40403)."""
        try:
            return self._client.get_schema(schema_id)
        except SchemaNotFoundError:
            return None

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """A subject's version (``"latest"`` or a number); the registry's typed error if absent."""
        return self._client.get_version(subject, version)
