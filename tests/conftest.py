"""Fixtures shared by every suite: real Redis and PostgreSQL, isolated per test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import unique

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def redis_url() -> str:
    """The machine's real Redis (tests isolate themselves with ``redis_prefix``)."""
    return REDIS_URL


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted afterwards."""
    import redis

    prefix = unique("hwtest") + ":"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL database of this test's own on the machine's real server, dropped afterwards."""
    import sqlalchemy

    name = unique("hwtest").replace("-", "_")
    admin = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
