"""The registry API end to end through the app, on a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

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


def rec(name: str, *fields: tuple[str, Any] | tuple[str, Any, Any]) -> str:
    out = []
    for f in fields:
        item: dict[str, Any] = {"name": f[0], "type": f[1]}
        if len(f) == 3:
            item["default"] = f[2]
        out.append(item)
    return orjson.dumps({"type": "record", "name": name, "fields": out}).decode()


V1 = rec("R", ("a", "int"))
V2 = rec("R", ("a", "int"), ("b", "string", ""))
BAD = rec("R", ("a", "int"), ("c", "string"))


def post(api: TestClient, path: str, body: Any, **params: Any) -> Any:
    return api.post(path, json=body, params=params)


def register(api: TestClient, subject: str, schema: str, **extra: Any) -> int:
    r = api.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


def error(response: Any) -> tuple[int, int]:
    return response.status_code, response.json()["error_code"]


def test_register_evolve_and_read_back(api: TestClient) -> None:
    s = unique("orders-value")
    id1 = register(api, s, V1)
    assert register(api, s, V1) == id1  # same schema: same id, no new version
    id2 = register(api, s, V2)
    assert id2 != id1
    assert api.get(f"/subjects/{s}/versions").json() == [1, 2]
    latest = api.get(f"/subjects/{s}/versions/latest")
    assert latest.headers["content-type"] == MEDIA
    assert latest.json() == {"subject": s, "version": 2, "id": id2, "schema": V2}
    assert api.get(f"/subjects/{s}/versions/-1").json()["version"] == 2
    assert api.get(f"/subjects/{s}/versions/1/schema").json() == orjson.loads(V1)
    assert api.get(f"/schemas/ids/{id1}").json() == {"schema": V1}
    assert api.get(f"/schemas/ids/{id1}/schema").json() == orjson.loads(V1)
    assert api.get(f"/schemas/ids/{id2}/subjects").json() == [s]
    assert api.get(f"/schemas/ids/{id2}/versions").json() == [{"subject": s, "version": 2}]
    assert s in api.get("/subjects").json()
    assert api.get("/schemas/types").json() == ["AVRO"]
    assert api.get("/").json() == {}
    assert api.get("/contexts").json() == ["."]
    listed = api.get("/schemas", params={"subjectPrefix": s, "latestOnly": "true"}).json()
    assert listed == [{"subject": s, "version": 2, "id": id2, "schema": V2}]


def test_same_schema_same_id_across_subjects_and_after_hard_delete(api: TestClient) -> None:
    a, b = unique("a"), unique("b")
    schema = rec(unique("T").replace("-", "_"), ("x", "long"))
    first = register(api, a, schema)
    assert register(api, b, schema) == first
    assert api.delete(f"/subjects/{a}").json() == [1]
    assert api.delete(f"/subjects/{a}", params={"permanent": "true"}).json() == [1]
    assert error(api.get(f"/subjects/{a}/versions")) == (404, 40401)
    assert register(api, a, schema) == first
    # The id still resolves, so data written with it stays readable.
    assert api.get(f"/schemas/ids/{first}").json() == {"schema": schema}


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


def test_lookup_exact_and_by_normal_form(api: TestClient) -> None:
    s = unique("l")
    schema_id = register(api, s, V1)
    found = post(api, f"/subjects/{s}", {"schema": V1}, normalize="False", deleted="False")
    assert found.json() == {"subject": s, "version": 1, "id": schema_id, "schema": V1}
    reordered = '{"fields":[{"type":"int","name":"a"}],  "name":"R","type":"record"}'
    assert post(api, f"/subjects/{s}", {"schema": reordered}).json()["id"] == schema_id
    assert error(post(api, f"/subjects/{s}", {"schema": V2})) == (404, 40403)
    assert error(post(api, f"/subjects/{unique('x')}", {"schema": V1})) == (404, 40401)
    api.delete(f"/subjects/{s}/versions/1")
    assert error(post(api, f"/subjects/{s}", {"schema": V1})) == (404, 40401)
    assert post(api, f"/subjects/{s}", {"schema": V1}, deleted="true").json()["version"] == 1


def test_normalize_registers_the_normal_form(api: TestClient) -> None:
    s = unique("n")
    spaced = '{"namespace":"x","type":"record","name":"N","fields":[{"name":"a","type":"int"}]}'
    first = api.post(f"/subjects/{s}/versions?normalize=true", json={"schema": spaced}).json()
    got = api.get(f"/subjects/{s}/versions/1").json()["schema"]
    assert got == '{"type":"record","name":"x.N","fields":[{"name":"a","type":"int"}]}'
    other = '{"type":"record","name":"x.N","fields":[{"name":"a","type":{"type":"int"}}]}'
    again = api.post(f"/subjects/{s}/versions?normalize=true", json={"schema": other}).json()
    assert again == first
    assert api.get(f"/subjects/{s}/versions").json() == [1]


def test_soft_and_hard_delete_rules(api: TestClient) -> None:
    s = unique("d")
    register(api, s, V1)
    register(api, s, V2)
    assert error(api.delete(f"/subjects/{s}/versions/1", params={"permanent": "true"})) == (
        404,
        40407,
    )
    assert api.delete(f"/subjects/{s}/versions/1").json() == 1
    assert error(api.delete(f"/subjects/{s}/versions/1")) == (404, 40406)
    assert api.get(f"/subjects/{s}/versions").json() == [2]
    assert api.get(f"/subjects/{s}/versions", params={"deleted": "true"}).json() == [1, 2]
    assert api.get(f"/subjects/{s}/versions", params={"deleted_only": "True"}).json() == [1]
    assert api.get(f"/subjects/{s}/versions", params={"deletedOnly": "true"}).json() == [1]
    assert error(api.get(f"/subjects/{s}/versions/1")) == (404, 40402)
    assert api.get(f"/subjects/{s}/versions/1", params={"deleted": "true"}).json()["version"] == 1
    assert api.delete(f"/subjects/{s}/versions/1", params={"permanent": "true"}).json() == 1
    assert error(api.delete(f"/subjects/{s}/versions/1")) == (404, 40402)
    assert error(api.delete(f"/subjects/{s}", params={"permanent": "true"})) == (404, 40405)
    api.put(f"/config/{s}", json={"compatibility": "NONE"})
    assert api.delete(f"/subjects/{s}").json() == [2]
    assert error(api.delete(f"/subjects/{s}")) == (404, 40404)
    assert s not in api.get("/subjects").json()
    assert s in api.get("/subjects", params={"deleted": "true"}).json()
    assert s in api.get("/subjects", params={"deletedOnly": "true"}).json()
    # Subject config survives a soft delete; versions continue after the highest ever used.
    assert api.get(f"/config/{s}").json() == {"compatibilityLevel": "NONE"}
    register(api, s, BAD)
    assert api.get(f"/subjects/{s}/versions").json() == [3]
    assert error(api.delete(f"/subjects/{unique('nobody')}")) == (404, 40401)


def test_references_resolve_and_block_deletes(api: TestClient) -> None:
    base, user = unique("address"), unique("user")
    address = rec("Address", ("city", "string"))
    register(api, base, address)
    person = '{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}'
    refs = [{"name": "Address", "subject": base, "version": 1}]
    user_id = register(api, user, person, references=refs)
    got = api.get(f"/subjects/{user}/versions/1").json()
    assert got["references"] == refs
    assert api.get(f"/schemas/ids/{user_id}").json() == {"schema": person, "references": refs}
    assert api.get(f"/subjects/{base}/versions/1/referencedby").json() == [user_id]
    assert error(api.delete(f"/subjects/{base}/versions/1")) == (422, 42206)
    assert error(api.delete(f"/subjects/{base}")) == (422, 42206)
    no_ref = api.post(f"/subjects/{unique('u')}/versions", json={"schema": person})
    assert error(no_ref) == (422, 42201)
    assert "Address" in no_ref.json()["message"]
    api.delete(f"/subjects/{user}")
    assert api.delete(f"/subjects/{base}/versions/1").json() == 1


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


def test_request_errors_are_confluent_shaped(api: TestClient) -> None:
    s = unique("e")
    r = api.post(f"/subjects/{s}/versions", content=b"{nope", headers={"content-type": MEDIA})
    assert r.status_code == 400
    assert r.headers["content-type"] == MEDIA
    assert error(api.post(f"/subjects/{s}/versions", json={"schem": V1})) == (422, 422)
    invalid = api.post(f"/subjects/{s}/versions", json={"schema": '{"type":"nope"}'})
    assert error(invalid) == (422, 42201)
    assert error(api.get(f"/subjects/{s}/versions/0")) == (422, 42202)
    assert error(api.get("/schemas/ids/987654321")) == (404, 40403)
    assert error(api.get(f"/subjects/{s}/versions/latest")) == (404, 40401)
    protobuf = api.post(
        f"/subjects/{s}/versions", json={"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF"}
    )
    assert error(protobuf) == (422, 42201)


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


def test_pagination_and_prefix(api: TestClient) -> None:
    prefix = unique("page")
    for i in range(3):
        register(api, f"{prefix}-{i}", rec(f"P{i}", ("a", "int")))
    params: dict[str, str | int] = {"subjectPrefix": prefix, "offset": 1, "limit": 1}
    assert api.get("/subjects", params=params).json() == [f"{prefix}-1"]
    assert len(api.get("/schemas", params={"subjectPrefix": prefix}).json()) == 3
    assert api.get("/schemas", params=params).json()[0]["subject"] == f"{prefix}-1"


def test_schema_by_id_cache_hit_answers_like_the_route(api: TestClient) -> None:
    from prometheus_client import REGISTRY as METRICS

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


def test_database_gone_is_50001(postgres_url: str) -> None:
    import sqlalchemy

    from tests.conftest import POSTGRES_ADMIN_URL

    with TestClient(create_app(RegistrySettings(database_url=postgres_url))) as client:
        assert client.get("/subjects").status_code == 200
        admin = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        name = postgres_url.rsplit("/", 1)[1]
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
        r = client.get("/subjects")
        assert r.status_code == 500
        assert r.json()["error_code"] == 50001
        assert r.json()["message"].startswith("Error in the backend data store: OperationalError")
        assert client.get("/readyz").status_code == 503
