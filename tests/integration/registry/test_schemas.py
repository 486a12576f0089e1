"""Schema routes: reads by global id, pre-rendered once and answered from the cache after."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY as METRICS

from tests.integration.registry.support import MEDIA, rec, record, register
from tests.support import unique


def test_schema_by_id_cache_hit_answers_like_the_route(api: TestClient) -> None:
    def hits() -> float:
        labels = {"cache": "schema_by_id"}
        return METRICS.get_sample_value("headwater_registry_cache_hits_total", labels) or 0.0

    schema_id = register(api, unique("cache"), rec(unique("C").replace("-", "_"), ("a", "int")))
    before = hits()
    miss = api.get(f"/schemas/ids/{schema_id}")
    assert hits() == before
    hit = api.get(f"/schemas/ids/{schema_id}")
    assert hits() == before + 1
    assert (hit.status_code, hit.content) == (miss.status_code, miss.content)
    assert hit.headers["content-type"] == miss.headers["content-type"] == MEDIA
    assert "x-request-id" in hit.headers


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
    for _ in range(3):  # one miss, then hits from the pre-rendered bytes
        api.get(f"/schemas/ids/{schema_id}")
        api.get(f"/schemas/ids/{schema_id}/schema")
    assert [served(r) - b for r, b in zip(routes, before, strict=True)] == [3.0, 3.0]
