"""Fixtures shared by every suite: real Redis, PostgreSQL and broker processes, isolated per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import ServiceProcess, free_port, unique

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


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A real broker process (fsync=never) with its own data directory, one per test module."""
    data = tmp_path_factory.mktemp("broker")
    port = free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(data), "BROKER_FSYNC": "never"}
    with ServiceProcess("headwater_broker", port, env, log_path=data / "broker.log") as process:
        yield process
