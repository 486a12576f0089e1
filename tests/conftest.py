"""Fixtures shared by every suite: real Redis, PostgreSQL and broker processes, isolated per run;
and what a test needs from the machine.

A test that needs Redis, PostgreSQL, Java (Spark), root, FUSE or docker-compose says so, with the
``needs(...)`` marker or by calling ``require`` (the ``redis_url``, ``redis_prefix`` and
``postgres_url`` fixtures do; the ``spark`` marker implies ``needs("java")``). On a laptop
without it the test is skipped, with the reason; when ``CI=true`` it fails instead, since
``.ci/run`` provides all of them and a skip there would hide a broken machine.

Every JVM the tests start (the Spark suite's session, and the jobs, demo and spark-submit runs it
starts as processes, which inherit the environment) gets the start-up flags of
``SPARK_TEST_JVM_OPTIONS``, set once per run by ``pytest_configure``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterator

import pytest

from headwater_kernel.local_service import PORT_RANGE_VARIABLE, port_range
from tests.support import ServiceProcess, free_port, unique

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
POSTGRES_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _on_path(program: str) -> Callable[[], bool]:
    return lambda: shutil.which(program) is not None


def _fuse_available() -> bool:
    import ctypes.util

    return (
        os.path.exists("/dev/fuse")
        and shutil.which("fusermount3") is not None
        and ctypes.util.find_library("fuse3") is not None
    )


# What a test may need: how to tell it is here, and what to do when it is not.
NEEDS: dict[str, tuple[Callable[[], bool], str]] = {
    "redis": (
        lambda: _listening(6379),
        "nothing answers at 127.0.0.1:6379 (start redis-server)",
    ),
    "postgres": (
        lambda: _listening(5432),
        "nothing answers at 127.0.0.1:5432 (start PostgreSQL, trust auth for user postgres)",
    ),
    "java": (
        _on_path("java"),
        "no `java` on PATH (Spark needs a JDK 17 or newer, e.g. apt-get install openjdk-17-jdk)",
    ),
    "root": (
        lambda: os.geteuid() == 0,
        "not running as root (mounting a tmpfs or a FUSE filesystem needs root; CI runs as root)",
    ),
    "fuse": (
        _fuse_available,
        "no FUSE: tests/support/lazyfs.py needs /dev/fuse, fusermount3 and libfuse3"
        " (apt-get install fuse3 libfuse3-3)",
    ),
    "docker-compose": (
        _on_path("docker-compose"),
        "no `docker-compose` on PATH (apt-get install docker-compose)",
    ),
}


@functools.cache
def _present(what: str) -> bool:
    return NEEDS[what][0]()


def require(what: str) -> None:
    """Skip the running test when the machine lacks ``what`` (a key of ``NEEDS``); fail it when
    ``CI=true``."""
    if what not in NEEDS:
        raise ValueError(f"unknown need {what!r}; known: {', '.join(NEEDS)}")
    if _present(what):
        return
    message = f"needs {what}: {NEEDS[what][1]}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}; CI=true, where .ci/run provides it, so this fails", pytrace=False)
    pytest.skip(message)


# A test's JVM lives for seconds: compiling with C1 only (no C2 tier) and the serial collector
# (no G1 threads and regions to set up) start Spark sooner, and tests never run long enough for
# C2's faster code to pay back its compile time.
SPARK_TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# The variables Spark's scripts put on its java command lines: SPARK_SUBMIT_OPTS on the JVM that
# runs the driver (and in local mode the executors), SPARK_LAUNCHER_OPTS on the short one that
# computes that command line (bin/spark-class).
SPARK_JVM_OPTION_VARIABLES = ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS")
_SELECTS_GC = re.compile(r"^-XX:\+Use\w*GC$")


def _setting(option: str) -> str:
    """What a JVM option sets: the collector for any -XX:+Use...GC (the JVM refuses two), else
    the option's name."""
    if _SELECTS_GC.match(option):
        return "garbage collector"
    return option.split("=", 1)[0]


def with_jvm_options(existing: str, options: tuple[str, ...]) -> str:
    """``existing`` with ``options`` appended, except those setting what ``existing`` already
    sets (a user's own collector or tier stays theirs)."""
    taken = {_setting(option) for option in existing.split()}
    added = [option for option in options if _setting(option) not in taken]
    return " ".join([existing, *added]) if existing.strip() else " ".join(added)


def pytest_configure(config: pytest.Config) -> None:
    """Give the JVMs tests start cheaper start-up flags, before any test starts one; give each
    parallel worker (pytest-xdist) a slice of the free-port range of its own."""
    for variable in SPARK_JVM_OPTION_VARIABLES:
        os.environ[variable] = with_jvm_options(
            os.environ.get(variable, ""), SPARK_TEST_JVM_OPTIONS
        )
    worker, count = (
        os.environ.get("PYTEST_XDIST_WORKER", ""),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT", ""),
    )
    low, high = port_range()
    if worker.startswith("gw") and count.isdigit() and high > low:
        index, total = int(worker[2:]), int(count)
        size = (high - low + 1) // total
        first = low + index * size
        os.environ[PORT_RANGE_VARIABLE] = f"{first}-{first + size - 1}"


# The fault tests run one after another on one parallel worker (``make test``): their timings
# (leases, sessions, fetch timeouts) are tested against each other's load, not their own; they
# pass beside a busy loop per core too (``make soak``).
FAULT_DIRECTORIES = ("tests/e2e/replication/", "tests/e2e/cluster/", "tests/e2e/broker/")
# The longest groups start first, so that the run does not wait on one begun last.
LONG_GROUPS = ("faults", "spark", "spark-processes")
# Spark tests that run spark-submit, the demo or the job's CLI as processes of their own: they
# share no session with the rest, so a second worker runs them beside the session's group.
SPARK_PROCESS_MODULES = (
    "tests/spark/test_spark_submit.py",
    "tests/spark/test_spark_demo.py",
    "tests/spark/test_spark_validate_exits.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the fault tests on one parallel worker, and the Spark tests that share a session on
    one (each worker would otherwise start a JVM session of its own), those that start Spark as
    processes of their own on another; put the groups first."""
    groups: dict[str, str] = {}
    for item in items:
        path = item.nodeid
        if path.startswith(FAULT_DIRECTORIES):
            groups[item.nodeid] = "faults"
        elif path.startswith(SPARK_PROCESS_MODULES):
            groups[item.nodeid] = "spark-processes"
        elif path.startswith("tests/spark/") or item.get_closest_marker("spark") is not None:
            groups[item.nodeid] = "spark"
        if item.nodeid in groups:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    rank = {name: i for i, name in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: rank.get(groups.get(item.nodeid, ""), len(LONG_GROUPS)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Check a test's needs before its fixtures start processes that would need them."""
    for mark in item.iter_markers("needs"):
        for what in mark.args:
            require(what)
    if item.get_closest_marker("spark") is not None:
        require("java")


@pytest.fixture
def redis_url() -> str:
    """The machine's real Redis (tests isolate themselves with ``redis_prefix``)."""
    require("redis")
    return REDIS_URL


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted afterwards."""
    import redis

    require("redis")
    prefix = unique("hwtest") + ":"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A database holding the cluster metadata's tables, made once per test worker: each test's
    database is cloned from it (``CREATE DATABASE ... TEMPLATE``), which is quicker than creating
    one and its tables afresh. No connection to it stays open (cloning needs none)."""
    import sqlalchemy

    from headwater_broker.cluster.tables import metadata

    require("postgres")
    name = unique("hwtemplate").replace("-", "_")
    admin = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    template = sqlalchemy.create_engine(f"{POSTGRES_SERVER_URL}/{name}")
    with template.begin() as conn:
        metadata.create_all(conn)
    template.dispose()
    yield name
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def postgres_url(postgres_template: str) -> Iterator[str]:
    """A PostgreSQL database of this test's own on the machine's real server (a clone of the
    worker's template: the cluster metadata's tables, no rows), dropped afterwards."""
    import sqlalchemy

    name = unique("hwtest").replace("-", "_")
    admin = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"'))
    yield f"{POSTGRES_SERVER_URL}/{name}"
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
