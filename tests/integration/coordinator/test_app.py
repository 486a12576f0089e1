"""The coordinator app as wired: every router's routes are served and documented."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_openapi_documents_every_route(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert set(paths) >= {
        "/groups",
        "/groups/{group_id}",
        "/groups/{group_id}/heartbeat",
        "/groups/{group_id}/offsets",
        "/groups/{group_id}/offsets/reset",
        "/groups/{group_id}/lag",
    }
