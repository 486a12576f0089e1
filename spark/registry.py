"""Reading schemas from the schema registry (Confluent REST API), cached per process.

Used on the driver (the expected schema of a subject) and on every executor (writer schemas by
id). Ids are immutable in the registry, so the by-id cache never needs invalidating; it lives at
module level so a Python worker that Spark reuses across tasks keeps it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from headwater.types import SchemaId

REGISTRY_MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"

# Confluent's codes: 40401 subject not found, 40402 version not found, 40403 schema not found.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """One schema as the registry stores it."""

    schema_id: SchemaId
    schema_type: str
    text: str
    subject: str | None = None
    version: int | None = None


class RegistryLookupError(Exception):
    """The registry answered with an error other than "schema not found"."""


_by_id: dict[tuple[str, int], RegisteredSchema | None] = {}
_lock = threading.Lock()


class SchemaRegistry:
    """A small, read-only registry client: schemas by id (cached) and subject versions."""

    def __init__(
        self, url: str, *, timeout: float = 10.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(
            timeout=timeout, transport=transport, headers={"Accept": REGISTRY_MEDIA_TYPE}
        )

    def close(self) -> None:
        self._client.close()

    def _get(self, path: str) -> tuple[int, Any]:
        response = self._client.get(self.url + path)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        return response.status_code, body

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this id, or None when the registry has none (40403)."""
        key = (self.url, schema_id)
        with _lock:
            if key in _by_id:
                return _by_id[key]
        status, body = self._get(f"/schemas/ids/{schema_id}")
        if status == 404 and _code(body) == SCHEMA_NOT_FOUND:
            found = None
        elif status != 200:
            raise RegistryLookupError(f"GET /schemas/ids/{schema_id}: HTTP {status} {body}")
        else:
            found = RegisteredSchema(
                SchemaId(schema_id), body.get("schemaType", "AVRO"), body["schema"]
            )
        with _lock:
            _by_id[key] = found
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """A subject's version (``"latest"`` or a number); RegistryLookupError when missing."""
        path = f"/subjects/{quote(subject, safe='')}/versions/{version}"
        status, body = self._get(path)
        if status != 200:
            raise RegistryLookupError(f"GET {path}: HTTP {status} {body}")
        return RegisteredSchema(
            SchemaId(int(body["id"])),
            body.get("schemaType", "AVRO"),
            body["schema"],
            subject=body.get("subject", subject),
            version=int(body["version"]),
        )


def _code(body: Any) -> int | None:
    return body.get("error_code") if isinstance(body, dict) else None


def canonical(text: str) -> str:
    """A schema text with stable key order, for comparing and hashing."""
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
