"""Config routes: global and per-subject compatibility level and normalize flag."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.registry.support import error
from tests.support import unique


def test_config_endpoints(api: TestClient) -> None:
    s = unique("c")
    assert api.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert error(api.get(f"/config/{s}")) == (404, 40408)
    assert api.get(f"/config/{s}", params={"defaultToGlobal": "true"}).json() == {
        "compatibilityLevel": "BACKWARD"
    }
    assert api.put(f"/config/{s}", json={"compatibility": "full"}).json() == {
        "compatibility": "FULL"
    }
    assert api.get(f"/config/{s}").json() == {"compatibilityLevel": "FULL"}
    assert error(api.put(f"/config/{s}", json={"compatibility": "SIDEWAYS"})) == (422, 42203)
    assert api.delete(f"/config/{s}").json() == {"compatibilityLevel": "FULL"}
    assert error(api.delete(f"/config/{s}")) == (404, 40408)
    assert api.put("/config", json={"compatibility": "NONE", "normalize": True}).json() == {
        "compatibility": "NONE",
        "normalize": True,
    }
    assert api.get("/config").json() == {"compatibilityLevel": "NONE", "normalize": True}
    assert api.delete("/config").json() == {"compatibilityLevel": "NONE", "normalize": True}
    assert api.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
