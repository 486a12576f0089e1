"""Request rewriting: subjects holding '/' (sent as %2F) and JSON bodies under other media types."""

from __future__ import annotations

import orjson
from fastapi.testclient import TestClient

from tests.integration.registry.support import MEDIA, V1
from tests.support import unique


def test_media_types_and_encoded_slash(api: TestClient) -> None:
    s = unique("team") + "/orders-value"
    encoded = s.replace("/", "%2F")
    body = orjson.dumps({"schema": V1})
    for media in (MEDIA, "application/vnd.schemaregistry+json", "application/octet-stream"):
        r = api.post(f"/subjects/{encoded}/versions", content=body, headers={"content-type": media})
        assert r.status_code == 200, (media, r.text)
    assert api.get(f"/subjects/{encoded}/versions").json() == [1]
    assert api.get(f"/subjects/{encoded}/versions/1").json()["subject"] == s
    assert s in api.get("/subjects").json()
    assert api.put(f"/config/{encoded}", json={"compatibility": "FULL"}).status_code == 200
    assert api.get(f"/config/{encoded}").json() == {"compatibilityLevel": "FULL"}
