"""Mode routes: read-only subjects, IMPORT with explicit ids and versions."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.registry.support import BAD, V1, error, rec, register
from tests.support import unique


def test_mode_endpoints_and_import(api: TestClient) -> None:
    s = unique("m")
    assert api.get("/mode").json() == {"mode": "READWRITE"}
    assert error(api.get(f"/mode/{s}")) == (404, 40409)
    assert error(api.put(f"/mode/{s}", json={"mode": "SIDEWAYS"})) == (422, 42204)
    assert api.put(f"/mode/{s}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert error(api.post(f"/subjects/{s}/versions", json={"schema": V1})) == (422, 42205)
    assert api.delete(f"/mode/{s}").json() == {"mode": "READONLY"}
    # Explicit ids need IMPORT mode.
    explicit = {"schema": V1, "id": 900001, "version": 5}
    assert error(api.post(f"/subjects/{s}/versions", json=explicit)) == (422, 42205)
    register(api, s, V1)
    assert error(api.put(f"/mode/{s}", json={"mode": "IMPORT"})) == (422, 42205)
    other = unique("imp")
    assert api.put(f"/mode/{other}", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    imported = rec(unique("I").replace("-", "_"), ("z", "int"))
    body = {"schema": imported, "id": 900001, "version": 5}
    assert api.post(f"/subjects/{other}/versions", json=body).json() == {"id": 900001}
    assert api.get(f"/subjects/{other}/versions").json() == [5]
    clash = {"schema": BAD, "id": 900001, "version": 6}
    assert error(api.post(f"/subjects/{other}/versions", json=clash)) == (422, 42207)
    assert api.put(f"/mode/{s}", params={"force": "true"}, json={"mode": "IMPORT"}).json() == {
        "mode": "IMPORT"
    }
    # Ids allocated after an import continue above the imported one.
    api.delete(f"/mode/{other}")
    fresh = register(api, unique("fresh"), rec(unique("F").replace("-", "_"), ("q", "int")))
    assert fresh > 900001
