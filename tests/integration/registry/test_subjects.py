"""Subject routes: register, read back, look up, delete; versions, paging (SQLite, PostgreSQL)."""

from __future__ import annotations

import orjson
from fastapi.testclient import TestClient

from tests.integration.registry.support import (
    BAD,
    MEDIA,
    V1,
    V2,
    answer,
    compact,
    error,
    post,
    rec,
    record,
    register,
)
from tests.support import unique


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


def test_pagination_and_prefix(api: TestClient) -> None:
    prefix = unique("page")
    for i in range(3):
        register(api, f"{prefix}-{i}", rec(f"P{i}", ("a", "int")))
    params: dict[str, str | int] = {"subjectPrefix": prefix, "offset": 1, "limit": 1}
    assert api.get("/subjects", params=params).json() == [f"{prefix}-1"]
    assert len(api.get("/schemas", params={"subjectPrefix": prefix}).json()) == 3
    assert api.get("/schemas", params=params).json()[0]["subject"] == f"{prefix}-1"


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
