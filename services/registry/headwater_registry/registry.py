"""The registry's domain core: the one door every request of the REST API goes through.

Everything the routes do is one awaited method of :class:`Registry`; nothing in the core knows
FastAPI or Starlette. Errors are :mod:`headwater.registry.errors` classes (a failing database is
50001). The work itself lives in modules named for what it is about: ``schemas`` (by id,
immutable, cached), ``subjects`` (versions, reads, deletes), ``registration`` (ids, lookup),
``compatibility``, ``config``, ``mode``, over the ``store`` package.

Concurrency, for the whole service:

* Requests reach the core on the event loop. Store work blocks, so :meth:`Registry._run` runs it
  on the loop itself for SQLite -- a query is a local file read of microseconds, and a hand-off to
  a worker thread and back costs more than it saves on a busy machine -- and in anyio's worker
  threads for PostgreSQL, whose network round trips would otherwise stall every other request.
  Answers held in the caches of immutable schema data never leave the loop.
* Writes are serialised by the store (``store/database.py``): per subject on PostgreSQL
  (transaction-scoped advisory locks on the subject and the subjects its references name), one
  at a time on SQLite (a process lock, then ``BEGIN IMMEDIATE`` against other processes). A
  write that conflicts with a concurrent one (two subjects registering the same new schema) is
  run again. Several processes may share one PostgreSQL: only immutable data is cached.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy.exc import SQLAlchemyError

from headwater.registry.errors import RegistryError
from headwater.types import SchemaId
from headwater_registry.compatibility import Compatibility
from headwater_registry.config import Configs, parse_level
from headwater_registry.documents import (
    CompatibilityResult,
    ConfigDocument,
    ConfigUpdate,
    ModeDocument,
    SubjectVersion,
    VersionDocument,
)
from headwater_registry.mode import Modes
from headwater_registry.registration import Registration
from headwater_registry.schemas import SchemaInput, Schemas, schema_types
from headwater_registry.store.database import SQLStore
from headwater_registry.subjects import Page, Subjects

log = logging.getLogger("headwater.registry")
T = TypeVar("T")


class Registry:
    """Everything the REST API does, over one :class:`SQLStore`."""

    def __init__(self, store: SQLStore, default_compatibility: str = "BACKWARD") -> None:
        self.store = store
        self.schemas = Schemas(store)
        self.configs = Configs(store, parse_level(default_compatibility))
        self.modes = Modes(store)
        self.subjects = Subjects(store, self.schemas, self.modes)
        self.compatibility = Compatibility(store, self.schemas, self.configs)
        self.registration = Registration(
            store,
            self.schemas,
            configs=self.configs,
            modes=self.modes,
            compatibility=self.compatibility,
        )

    def open(self) -> None:
        """Apply the store's missing migrations (before the first request)."""
        self.store.open()

    def close(self) -> None:
        self.store.close()

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        """Whether the database answers, for ``/readyz``."""
        try:
            await self._run(self.store.ping)
        except RegistryError as e:
            cause = e.__cause__ or e
            return False, {"database": f"{type(cause).__name__}: {cause}"}
        return True, {"database": "ok"}

    # --- schemas by id --------------------------------------------------------------------------

    def prerendered_schema(self, schema_id: SchemaId, *, text_only: bool) -> bytes | None:
        """``GET /schemas/ids/{id}`` (``.../schema``) if this process has answered it before."""
        return self.schemas.prerendered(schema_id, text_only=text_only)

    async def schema_body(self, schema_id: SchemaId, *, text_only: bool) -> bytes:
        """``GET /schemas/ids/{id}`` (``.../schema``), rendered JSON (40403 if no such id)."""
        body = self.schemas.prerendered(schema_id, text_only=text_only)
        if body is not None:
            return body
        return await self._run(lambda: self.schemas.render(schema_id, text_only=text_only))

    async def schema_subjects(self, schema_id: SchemaId, *, deleted: bool) -> list[str]:
        return await self._run(lambda: self.schemas.subjects_of(schema_id, deleted=deleted))

    async def schema_versions(self, schema_id: SchemaId, *, deleted: bool) -> list[SubjectVersion]:
        return await self._run(lambda: self.schemas.versions_of(schema_id, deleted=deleted))

    async def list_schemas(
        self, prefix: str, page: Page, *, deleted: bool, latest_only: bool
    ) -> list[VersionDocument]:
        return await self._run(
            lambda: self.subjects.list_schemas(
                prefix, page, deleted=deleted, latest_only=latest_only
            )
        )

    @staticmethod
    def schema_types() -> list[str]:
        """``GET /schemas/types``: what this registry parses (Avro)."""
        return schema_types()

    # --- subjects and versions ------------------------------------------------------------------

    async def list_subjects(
        self, prefix: str, page: Page, *, deleted: bool, deleted_only: bool
    ) -> list[str]:
        return await self._run(
            lambda: self.subjects.list_subjects(
                prefix, page, deleted=deleted, deleted_only=deleted_only
            )
        )

    async def list_versions(
        self, subject: str, page: Page, *, deleted: bool, deleted_only: bool
    ) -> list[int]:
        return await self._run(
            lambda: self.subjects.list_versions(
                subject, page, deleted=deleted, deleted_only=deleted_only
            )
        )

    async def get_version(self, subject: str, version: str, *, deleted: bool) -> VersionDocument:
        return await self._run(lambda: self.subjects.get_version(subject, version, deleted=deleted))

    async def get_version_schema(self, subject: str, version: str, *, deleted: bool) -> Any:
        return await self._run(
            lambda: self.subjects.get_version_schema(subject, version, deleted=deleted)
        )

    async def referenced_by(self, subject: str, version: str) -> list[int]:
        return await self._run(lambda: self.subjects.referenced_by(subject, version))

    async def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        return await self._run(lambda: self.subjects.delete_subject(subject, permanent=permanent))

    async def delete_version(self, subject: str, version: str, *, permanent: bool) -> int:
        return await self._run(
            lambda: self.subjects.delete_version(subject, version, permanent=permanent)
        )

    async def contexts(self) -> list[str]:
        return await self._run(self.subjects.contexts)

    # --- registration and compatibility ---------------------------------------------------------

    async def register(
        self,
        subject: str,
        schema: SchemaInput,
        *,
        normalize: bool,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> SchemaId:
        return await self._run(
            lambda: self.registration.register(
                subject, schema, normalize=normalize, schema_id=schema_id, version=version
            )
        )

    async def lookup(
        self, subject: str, schema: SchemaInput, *, normalize: bool, deleted: bool
    ) -> VersionDocument:
        return await self._run(
            lambda: self.registration.lookup(subject, schema, normalize=normalize, deleted=deleted)
        )

    async def test_compatibility(
        self,
        subject: str,
        version: str | None,
        schema: SchemaInput,
        *,
        normalize: bool,
        verbose: bool,
    ) -> CompatibilityResult:
        return await self._run(
            lambda: self.compatibility.test(
                subject, version, schema, normalize=normalize, verbose=verbose
            )
        )

    # --- config and mode ------------------------------------------------------------------------

    async def get_config(self, subject: str | None, *, default_to_global: bool) -> ConfigDocument:
        return await self._run(
            lambda: self.configs.get(subject, default_to_global=default_to_global)
        )

    async def put_config(
        self, subject: str | None, *, compatibility: str | None, normalize: bool | None
    ) -> ConfigUpdate:
        return await self._run(
            lambda: self.configs.put(subject, compatibility=compatibility, normalize=normalize)
        )

    async def delete_config(self, subject: str | None) -> ConfigDocument:
        return await self._run(lambda: self.configs.delete(subject))

    async def get_mode(self, subject: str | None, *, default_to_global: bool) -> ModeDocument:
        return await self._run(lambda: self.modes.get(subject, default_to_global=default_to_global))

    async def put_mode(self, subject: str | None, mode: str, *, force: bool) -> ModeDocument:
        return await self._run(lambda: self.modes.put(subject, mode, force=force))

    async def delete_mode(self, subject: str | None) -> ModeDocument:
        return await self._run(lambda: self.modes.delete(subject))

    # --- the policy -----------------------------------------------------------------------------

    async def _run(self, call: Callable[[], T]) -> T:
        """Run blocking store work as the module docstring says; a failing database is 50001."""
        try:
            if self.store.is_postgres:
                return await anyio.to_thread.run_sync(call)
            return call()
        except SQLAlchemyError as e:
            # The database failing (down, timed out) is Confluent's 50001 "error in the backend
            # data store", not an anonymous 500.
            log.warning("store error: %s", e)
            reason = str(e).splitlines()[0][:300]
            raise RegistryError(
                f"Error in the backend data store: {type(e).__name__}: {reason}"
            ) from e
