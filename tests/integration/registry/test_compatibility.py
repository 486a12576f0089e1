"""Compatibility: the check registration runs (409) and the /compatibility routes."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.integration.registry.support import BAD, V1, V2, error, post, rec, register
from tests.support import unique


def test_incompatible_schema_is_409_with_details(api: TestClient) -> None:
    s = unique("s")
    register(api, s, V1)
    r = api.post(f"/subjects/{s}/versions", json={"schema": BAD})
    assert error(r) == (409, 40901)
    message = r.json()["message"]
    assert message.startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{s}"'
    )
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in message
    assert "/fields/1" in message
    assert api.get(f"/subjects/{s}/versions").json() == [1]


def test_compatibility_endpoints_and_verbose(api: TestClient) -> None:
    s = unique("s")
    missing = unique("none")
    fresh = post(api, f"/compatibility/subjects/{missing}/versions/latest", {"schema": V1})
    assert fresh.json() == {"is_compatible": True}
    assert error(post(api, f"/compatibility/subjects/{missing}/versions/3", {"schema": V1})) == (
        404,
        40401,
    )
    register(api, s, V1)
    ok = post(api, f"/compatibility/subjects/{s}/versions/1", {"schema": V2})
    assert ok.json() == {"is_compatible": True}
    bad = post(api, f"/compatibility/subjects/{s}/versions/latest", {"schema": BAD}, verbose="True")
    body = bad.json()
    assert body["is_compatible"] is False
    assert body["messages"][0].startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert body["messages"][-1] == "{compatibility: 'BACKWARD'}"
    assert error(post(api, f"/compatibility/subjects/{s}/versions/7", {"schema": V2})) == (
        404,
        40402,
    )
    assert error(post(api, f"/compatibility/subjects/{s}/versions/abc", {"schema": V2})) == (
        422,
        42202,
    )


def test_transitive_levels_check_every_live_version(api: TestClient) -> None:
    s = unique("t")
    assert api.put(f"/config/{s}", json={"compatibility": "BACKWARD_TRANSITIVE"}).json() == {
        "compatibility": "BACKWARD_TRANSITIVE"
    }
    register(api, s, V1)
    register(api, s, V2)
    v3 = rec("R", ("a", "int"), ("b", "string"))  # reads v2, not v1
    all_versions = post(api, f"/compatibility/subjects/{s}/versions", {"schema": v3})
    assert all_versions.json() == {"is_compatible": False}
    # Against one named version only that version counts.
    assert post(api, f"/compatibility/subjects/{s}/versions/2", {"schema": v3}).json() == {
        "is_compatible": True
    }
    assert error(api.post(f"/subjects/{s}/versions", json={"schema": v3})) == (409, 40901)
    api.put(f"/config/{s}", json={"compatibility": "BACKWARD"})
    register(api, s, v3)
