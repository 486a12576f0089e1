"""The registry's hot read paths: one-row version lookups and pre-rendered schema bodies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY as METRICS

from headwater_registry.app import create_app
from headwater_registry.settings import RegistrySettings
from tests.support import unique

MEDIA = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with TestClient(create_app(RegistrySettings(database_url=url))) as client:
        yield client


def record(name: str) -> str:
    # Sent pretty-printed; the registry keeps and answers the compact form.
    body = {"type": "record", "name": name, "fields": [{"name": "a", "type": "long"}]}
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def compact(name: str) -> str:
    return orjson.dumps(orjson.loads(record(name))).decode()


def register(api: TestClient, subject: str, schema: str) -> int:
    r = api.post(f"/subjects/{subject}/versions", json={"schema": schema})
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


def answer(api: TestClient, path: str, **params: Any) -> tuple[int, Any]:
    r = api.get(path, params=params)
    body = r.json()
    if r.status_code != 200:
        return r.status_code, body["error_code"]
    return 200, body["version"] if isinstance(body, dict) and "version" in body else body


def test_latest_and_numbered_versions_around_soft_deletes(api: TestClient) -> None:
    s = unique("hot")
    api.put(f"/config/{s}", json={"compatibility": "NONE"})
    ids = [register(api, s, record(f"V{n}")) for n in (1, 2, 3)]
    versions = f"/subjects/{s}/versions"

    assert answer(api, f"{versions}/latest") == (200, 3)
    assert api.get(f"{versions}/-1").json() == {
        "subject": s,
        "version": 3,
        "id": ids[2],
        "schema": compact("V3"),
    }
    assert api.delete(f"{versions}/3").json() == 3
    # The newest live version, even when a soft-deleted one is newer.
    assert answer(api, f"{versions}/latest") == (200, 2)
    assert answer(api, f"{versions}/latest", deleted="true") == (200, 2)
    assert answer(api, f"{versions}/3") == (404, 40402)
    assert answer(api, f"{versions}/3", deleted="true") == (200, 3)
    assert answer(api, f"{versions}/9", deleted="true") == (404, 40402)
    assert api.get(f"{versions}/latest/schema").json() == orjson.loads(record("V2"))

    assert api.delete(f"/subjects/{s}").json() == [1, 2]
    # Nothing live: the subject is gone unless soft-deleted versions are asked for, and then
    # "latest" is the newest of them.
    assert answer(api, f"{versions}/latest") == (404, 40401)
    assert answer(api, f"{versions}/2") == (404, 40401)
    assert answer(api, f"{versions}/latest", deleted="true") == (200, 3)
    assert answer(api, f"{versions}/2", deleted="true") == (200, 2)
    assert answer(api, f"{versions}/9", deleted="true") == (404, 40402)
    assert answer(api, f"/subjects/{unique('nobody')}/versions/latest", deleted="true") == (
        404,
        40401,
    )


def test_schema_text_cache_hit_answers_like_the_route(api: TestClient) -> None:
    def hits() -> float:
        labels = {"cache": "schema_text"}
        return METRICS.get_sample_value("headwater_registry_cache_hits_total", labels) or 0.0

    name = unique("Text").replace("-", "_")
    schema_id = register(api, unique("hot"), record(name))
    before = hits()
    miss = api.get(f"/schemas/ids/{schema_id}/schema")
    assert hits() == before
    hit = api.get(f"/schemas/ids/{schema_id}/schema")
    assert hits() == before + 1
    expected = (
        b'{"type":"record","name":"%s","fields":[{"name":"a","type":"long"}]}' % name.encode()
    )
    assert (miss.status_code, miss.content) == (hit.status_code, hit.content) == (200, expected)
    assert hit.headers["content-type"] == miss.headers["content-type"] == MEDIA
    assert hit.headers["content-length"] == str(len(expected))
    assert "x-request-id" in hit.headers
    # The full answer by id carries the same text as a JSON string.
    assert api.get(f"/schemas/ids/{schema_id}").json() == {"schema": expected.decode()}
    assert api.get(f"/schemas/ids/{schema_id + 1000}/schema").json()["error_code"] == 40403


def test_cached_reads_are_counted_under_their_route_templates(api: TestClient) -> None:
    schema_id = register(api, unique("hot"), record(unique("Count").replace("-", "_")))

    def served(route: str) -> float:
        labels = {"method": "GET", "route": route, "status": "200"}
        return METRICS.get_sample_value("headwater_http_requests_total", labels) or 0.0

    routes = ("/schemas/ids/{id}", "/schemas/ids/{id}/schema")
    before = [served(r) for r in routes]
    for _ in range(3):  # one miss, then hits answered before FastAPI's routing
        api.get(f"/schemas/ids/{schema_id}")
        api.get(f"/schemas/ids/{schema_id}/schema")
    assert [served(r) - b for r, b in zip(routes, before, strict=True)] == [3.0, 3.0]
