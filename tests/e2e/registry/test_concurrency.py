"""Registry processes sharing one PostgreSQL: ids and versions stay right under racing writers."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e

PROCESSES = 3


@pytest.fixture
def registries(postgres_url: str, tmp_path: Path) -> Iterator[list[str]]:
    procs = []
    try:
        for i in range(PROCESSES):
            port = free_port()
            env = {"REGISTRY_PORT": str(port), "REGISTRY_DATABASE_URL": postgres_url}
            procs.append(ServiceProcess("headwater_registry", port, env, tmp_path / f"r{i}.log"))
        # Started together, so they also race to apply the migrations.
        with ThreadPoolExecutor(PROCESSES) as pool:
            list(pool.map(lambda p: p.start(), procs))
        yield [p.url for p in procs]
    finally:
        for p in procs:
            p.stop()


def schema(n: int) -> str:
    fields = [{"name": f"f{i}", "type": "int", "default": 0} for i in range(n + 1)]
    return orjson.dumps({"type": "record", "name": "Evolving", "fields": fields}).decode()


def test_parallel_writers_agree_on_ids_and_versions(registries: list[str]) -> None:
    subjects = [unique("race") for _ in range(4)]
    # 8 distinct schemas, each registered into every subject, by 3 processes x 8 threads, in a
    # shuffled order and twice over (re-registration must not add versions).
    jobs = [(s, n) for s in subjects for n in range(8)] * 2
    random.Random(7).shuffle(jobs)
    clients = [httpx.Client(base_url=url, timeout=30) for url in registries]

    def run(job: tuple[int, tuple[str, int]]) -> tuple[str, int, int]:
        i, (subject, n) = job
        r = clients[i % PROCESSES].post(f"/subjects/{subject}/versions", json={"schema": schema(n)})
        assert r.status_code == 200, r.text
        return subject, n, int(r.json()["id"])

    with ThreadPoolExecutor(24) as pool:
        results = list(pool.map(run, enumerate(jobs)))
    ids_by_schema: dict[int, set[int]] = defaultdict(set)
    for _subject, n, schema_id in results:
        ids_by_schema[n].add(schema_id)
    # One id per distinct schema, whichever process and subject registered it first.
    assert all(len(ids) == 1 for ids in ids_by_schema.values())
    assert len({next(iter(ids)) for ids in ids_by_schema.values()}) == 8
    for subject in subjects:
        versions = clients[0].get(f"/subjects/{subject}/versions").json()
        assert versions == list(range(1, 9))
        seen = {clients[1].get(f"/subjects/{subject}/versions/{v}").json()["id"] for v in versions}
        assert seen == {next(iter(ids)) for ids in ids_by_schema.values()}
    for c in clients:
        c.close()


def test_parallel_new_versions_in_one_subject_are_numbered_without_gaps(
    registries: list[str],
) -> None:
    subject = unique("one")
    clients = [httpx.Client(base_url=url, timeout=30) for url in registries]
    # Each schema adds a defaulted field, so any order is backward compatible.
    names = [unique("v").replace("-", "_") for _ in range(30)]

    def run(i: int) -> int:
        body = {
            "type": "record",
            "name": "Wide",
            "fields": [{"name": names[i], "type": "int", "default": i}],
        }
        r = clients[i % PROCESSES].put(f"/config/{subject}", json={"compatibility": "NONE"})
        assert r.status_code == 200
        r = clients[i % PROCESSES].post(
            f"/subjects/{subject}/versions", json={"schema": orjson.dumps(body).decode()}
        )
        assert r.status_code == 200, r.text
        return int(r.json()["id"])

    with ThreadPoolExecutor(15) as pool:
        ids = list(pool.map(run, range(30)))
    assert len(set(ids)) == 30
    assert clients[2].get(f"/subjects/{subject}/versions").json() == list(range(1, 31))
    by_version = {
        clients[0].get(f"/subjects/{subject}/versions/{v}").json()["id"] for v in range(1, 31)
    }
    assert by_version == set(ids)
    for c in clients:
        c.close()
