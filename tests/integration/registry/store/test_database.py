"""The SQL store's contract on SQLite and PostgreSQL: versioned migrations, concurrent writers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from headwater.registry.errors import StoreTimeoutError
from headwater_registry.registry import Registry
from headwater_registry.schemas import SchemaInput
from headwater_registry.store.database import SQLStore
from headwater_registry.store.tables import (
    MIGRATIONS,
    counters,
    schema_migrations,
    subject_schema_index,
)
from headwater_registry.subjects import Page
from tests.support import unique


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return str(request.getfixturevalue("postgres_url"))


def schema(name: str) -> SchemaInput:
    body = {"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}
    return SchemaInput(orjson.dumps(body).decode())


def opened(url: str) -> SQLStore:
    store = SQLStore(url)
    store.open()
    return store


def applied(store: SQLStore) -> list[int]:
    with store.read() as tx:
        query = sa.select(schema_migrations.c.version).order_by(schema_migrations.c.version)
        return list(tx.connection.execute(query).scalars())


def test_migrations_are_recorded_and_applied_once(url: str) -> None:
    store = opened(url)
    assert applied(store) == [v for v, _, _ in MIGRATIONS] == [1, 2, 3]
    store.close()
    again = opened(url)  # opening an up-to-date database applies nothing
    assert applied(again) == [1, 2, 3]
    again.close()


def test_upgrade_from_version_1_seeds_the_id_counter_and_adds_the_index(url: str) -> None:
    store = opened(url)
    registration = Registry(store).registration
    first = registration.register(unique("up"), schema("A"), normalize=False)
    second = registration.register(unique("up"), schema("B"), normalize=False)
    # Roll the database back to what migration 1 alone produced.
    with store.engine.begin() as conn:
        counters.drop(conn)
        subject_schema_index.drop(conn)
        conn.execute(sa.delete(schema_migrations).where(schema_migrations.c.version >= 2))
    store.close()
    upgraded = opened(url)
    assert applied(upgraded) == [1, 2, 3]
    third = Registry(upgraded).registration.register(unique("up"), schema("C"), normalize=False)
    assert (first, second, third) == (1, 2, 3)
    indexes = {i["name"] for i in sa.inspect(upgraded.engine).get_indexes("subject_versions")}
    assert "ix_subject_versions_subject_schema" in indexes
    upgraded.close()


def test_threads_registering_in_one_subject_get_distinct_gapless_versions(url: str) -> None:
    store = opened(url)
    registry = Registry(store, default_compatibility="NONE")
    subject = unique("threads")
    names = [f"T{i}" for i in range(24)]

    def register(name: str) -> int:
        return registry.registration.register(subject, schema(name), normalize=False)

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(register, names))
    assert sorted(ids) == list(range(1, 25))
    versions = registry.subjects.list_versions(subject, Page(), deleted=False, deleted_only=False)
    assert versions == list(range(1, 25))
    store.close()


def test_a_write_that_keeps_conflicting_gives_up_after_its_attempts(url: str) -> None:
    store = SQLStore(url, write_attempts=3)
    store.open()
    tried: list[int] = []

    def busy(tx: object) -> None:
        tried.append(len(tried))
        raise OperationalError("UPDATE counters", {}, Exception("database is locked"))

    with pytest.raises(StoreTimeoutError, match="Gave up after 3 conflicting attempts"):
        store.write(busy, unique("busy"))
    assert tried == [0, 1, 2]
    with pytest.raises(ValueError, match="write_attempts must be at least 1, got 0"):
        SQLStore(url, write_attempts=0)
    store.close()
