"""``SchemaRegistryClient``: a cached, typed HTTP client for the Confluent Schema Registry API."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx

from headwater.client.tls import shared_ssl_context
from headwater.closeable import Closeable
from headwater.registry.errors import REGISTRY
from headwater.registry.schema import SchemaReference
from headwater.types import SchemaId

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry stores it under a global id (and maybe a subject version)."""

    schema_id: SchemaId
    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    subject: str | None = None
    version: int | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any], schema_id: int | None = None) -> RegisteredSchema:
        refs = tuple(SchemaReference(**r) for r in body.get("references") or ())
        return cls(
            SchemaId(int(body.get("id", schema_id or 0))),
            body["schema"],
            body.get("schemaType", "AVRO"),
            refs,
            body.get("subject"),
            body.get("version"),
        )


class CompatibilityResult(NamedTuple):
    """Whether a schema would be accepted, and the registry's reasons when not."""

    is_compatible: bool
    messages: list[str]


class SchemaRegistryClient(Closeable):
    """Talks to a registry at ``url``; errors come back as :mod:`headwater.registry.errors` types.

    Contract: what can never change is cached for the life of the client -- a schema by id, and
    the id a subject gave a schema text -- so serializers hit the network once per schema.
    Subject state (latest version, config) is always fetched. Thread-safe; pass ``transport``
    (e.g. ``httpx.ASGITransport`` is async, so use ``httpx.MockTransport`` or a real URL) to test.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            verify=ssl_context or shared_ssl_context(),
            headers={"Accept": MEDIA_TYPE, "Content-Type": MEDIA_TYPE},
        )
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._ids: dict[tuple[str, str, bool], SchemaId] = {}

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        body: Any
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            raise REGISTRY.from_body(response.status_code, body)
        return body

    # --- schemas --------------------------------------------------------------------------------

    def register_schema(
        self,
        subject: str,
        schema_str: str,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
    ) -> SchemaId:
        """Register ``schema_str`` under ``subject`` (idempotent) and return its global id."""
        key = (subject, schema_str, normalize)
        with self._lock:
            cached = self._ids.get(key)
        if cached is not None:
            return cached
        body = self._call(
            "POST",
            f"/subjects/{_q(subject)}/versions",
            params={"normalize": normalize},
            json=_schema_body(schema_str, references),
        )
        schema_id = SchemaId(int(body["id"]))
        with self._lock:
            self._ids[key] = schema_id
        return schema_id

    def lookup_schema(
        self, subject: str, schema_str: str, references: Sequence[SchemaReference] = ()
    ) -> RegisteredSchema:
        """The version of ``subject`` that holds ``schema_str`` (40401 / 40403 if none)."""
        body = self._call(
            "POST", f"/subjects/{_q(subject)}", json=_schema_body(schema_str, references)
        )
        return RegisteredSchema.from_body(body)

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this global id (cached: ids are immutable)."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        body = self._call("GET", f"/schemas/ids/{schema_id}")
        found = RegisteredSchema.from_body(body, schema_id)
        with self._lock:
            self._by_id[schema_id] = found
        return found

    def get_subjects(self, *, deleted: bool = False) -> list[str]:
        return list(self._call("GET", "/subjects", params={"deleted": deleted}))

    def get_versions(self, subject: str) -> list[int]:
        return list(self._call("GET", f"/subjects/{_q(subject)}/versions"))

    def get_version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        return RegisteredSchema.from_body(
            self._call("GET", f"/subjects/{_q(subject)}/versions/{version}")
        )

    def get_latest_version(self, subject: str) -> RegisteredSchema:
        return self.get_version(subject, "latest")

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        return list(
            self._call("DELETE", f"/subjects/{_q(subject)}", params={"permanent": permanent})
        )

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        return int(
            self._call(
                "DELETE",
                f"/subjects/{_q(subject)}/versions/{version}",
                params={"permanent": permanent},
            )
        )

    # --- compatibility and config ---------------------------------------------------------------

    def test_compatibility(
        self,
        subject: str,
        schema_str: str,
        references: Sequence[SchemaReference] = (),
        *,
        version: int | str | None = None,
    ) -> CompatibilityResult:
        """Would ``schema_str`` be accepted? ``version=None`` checks what registration checks."""
        path = f"/compatibility/subjects/{_q(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        body = self._call(
            "POST", path, params={"verbose": True}, json=_schema_body(schema_str, references)
        )
        return CompatibilityResult(bool(body["is_compatible"]), list(body.get("messages") or []))

    def get_compatibility(self, subject: str | None = None) -> str:
        """The level that applies to ``subject`` (its own, else the global one)."""
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str(self._call("GET", path, params={"defaultToGlobal": True})["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_q(subject)}"
        return str(self._call("PUT", path, json={"compatibility": level})["compatibility"])


def _q(subject: str) -> str:
    # Every reserved character, '/' included, is percent-encoded, as Confluent's clients do.
    return quote(subject, safe="")


def _schema_body(schema_str: str, references: Sequence[SchemaReference]) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": schema_str}
    if references:
        body["references"] = [r.to_dict() for r in references]
    return body
