"""Requests no registry should serve: ids and versions out of Java's int, NUL, invalid Avro.

Each answers Confluent's 4xx, on SQLite and on PostgreSQL (whose 32-bit columns and text
without NUL are where such values used to end up as 500s), and changes nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.registry.schema import fingerprint
from headwater_registry.store.queries import StoredSchema, Transaction
from tests.integration.registry.support import V1, V2, error, register
from tests.support import unique

TOO_BIG = "9223372036854775808"
NOT_INTS = [TOO_BIG, "2147483648", "-2147483649", "99999999999999999999999", "1_0", " 1", "1.0"]


@pytest.mark.parametrize("schema_id", [*NOT_INTS, "-1", "0", "2147483647", "abc"])
@pytest.mark.parametrize("tail", ["", "/schema", "/subjects", "/versions"])
def test_ids_that_name_no_schema_are_40403(api: TestClient, schema_id: str, tail: str) -> None:
    r = api.get(f"/schemas/ids/{schema_id}{tail}")
    assert error(r) == (404, 40403)
    assert r.json()["message"] == f"Schema {schema_id} not found"


def test_an_id_with_a_sign_or_leading_zeros_is_the_id(api: TestClient) -> None:
    schema_id = register(api, unique("ids"), V1)
    for spelled in (f"+{schema_id}", f"000{schema_id}"):
        assert (
            api.get(f"/schemas/ids/{spelled}").json() == api.get(f"/schemas/ids/{schema_id}").json()
        )


@pytest.mark.parametrize("version", [*NOT_INTS, "0", "-2", "-0", "latest2", "%C2%B9"])
def test_versions_out_of_range_are_42202_on_every_route(api: TestClient, version: str) -> None:
    s = unique("ver")
    register(api, s, V1)
    body = {"schema": V1}
    answers = [
        api.get(f"/subjects/{s}/versions/{version}"),
        api.get(f"/subjects/{s}/versions/{version}/schema"),
        api.get(f"/subjects/{s}/versions/{version}/referencedby"),
        api.delete(f"/subjects/{s}/versions/{version}"),
        api.delete(f"/subjects/{s}/versions/{version}", params={"permanent": "true"}),
        api.post(f"/compatibility/subjects/{s}/versions/{version}", json=body),
    ]
    for r in answers:
        assert error(r) == (422, 42202), (r.request.method, r.request.url, r.text)
        assert "is not a valid version id" in r.json()["message"]
    assert api.get(f"/subjects/{s}/versions").json() == [1]


def test_the_largest_java_int_is_a_version_that_is_not_there(api: TestClient) -> None:
    s = unique("ver")
    register(api, s, V1)
    top = "2147483647"
    assert error(api.get(f"/subjects/{s}/versions/{top}")) == (404, 40402)
    assert error(api.delete(f"/subjects/{s}/versions/{top}")) == (404, 40402)
    check = api.post(f"/compatibility/subjects/{s}/versions/{top}", json={"schema": V2})
    assert error(check) == (404, 40402)
    assert api.get(f"/subjects/{s}/versions/+1").json()["version"] == 1


@pytest.mark.parametrize(
    "extra",
    [
        {"id": 2**31},
        {"id": int(TOO_BIG)},
        {"version": 2**31},
        {"version": -(2**31) - 1},
        {"references": [{"name": "x", "subject": "s", "version": int(TOO_BIG)}]},
    ],
)
def test_body_ids_and_versions_beyond_java_int_are_422(
    api: TestClient, extra: dict[str, Any]
) -> None:
    s = unique("imp")
    assert api.put(f"/mode/{s}", json={"mode": "IMPORT"}).status_code == 200
    assert error(api.post(f"/subjects/{s}/versions", json={"schema": V1, **extra})) == (422, 422)
    assert error(api.get(f"/subjects/{s}/versions")) == (404, 40401)


def test_ids_and_versions_end_at_the_top_of_java_int(api: TestClient) -> None:
    s = unique("top")
    assert api.put(f"/mode/{s}", json={"mode": "IMPORT"}).status_code == 200
    top = 2**31 - 1
    assert register(api, s, V1, id=top, version=top) == top
    assert api.put(f"/mode/{s}", json={"mode": "READWRITE"}).status_code == 200
    assert api.put(f"/config/{s}", json={"compatibility": "NONE"}).status_code == 200
    # No next version number in this subject; no next id anywhere.
    assert error(api.post(f"/subjects/{s}/versions", json={"schema": V2})) == (422, 42202)
    other = api.post(f"/subjects/{unique('next')}/versions", json={"schema": V2})
    assert error(other) == (422, 42205)
    assert "No schema id is left" in other.json()["message"]


NUL = "a%00b"


def test_subjects_holding_nul_are_subjects_that_do_not_exist(api: TestClient) -> None:
    body = {"schema": V1}
    assert error(api.get(f"/subjects/{NUL}/versions")) == (404, 40401)
    assert error(api.get(f"/subjects/{NUL}/versions/1")) == (404, 40401)
    assert error(api.get(f"/subjects/{NUL}/versions/latest/schema")) == (404, 40401)
    assert error(api.post(f"/subjects/{NUL}", json=body)) == (404, 40401)
    assert error(api.delete(f"/subjects/{NUL}")) == (404, 40401)
    assert error(api.delete(f"/subjects/{NUL}/versions/1")) == (404, 40401)
    assert error(api.get(f"/subjects/{NUL}/versions/1/referencedby")) == (404, 40401)
    assert error(api.get(f"/config/{NUL}")) == (404, 40408)
    assert "compatibilityLevel" in api.get(f"/config/{NUL}?defaultToGlobal=true").json()
    assert error(api.delete(f"/config/{NUL}")) == (404, 40408)
    assert error(api.get(f"/mode/{NUL}")) == (404, 40409)
    assert error(api.delete(f"/mode/{NUL}")) == (404, 40409)
    compatible = api.post(f"/compatibility/subjects/{NUL}/versions/latest", json=body)
    assert compatible.json() == {"is_compatible": True}
    assert api.get("/subjects", params={"subjectPrefix": "a\x00"}).json() == []
    assert api.get("/schemas", params={"subjectPrefix": "a\x00"}).json() == []
    # Writes refuse the name itself.
    assert error(api.post(f"/subjects/{NUL}/versions", json=body)) == (422, 42208)
    assert error(api.put(f"/config/{NUL}", json={"compatibility": "NONE"})) == (422, 42208)
    assert error(api.put(f"/mode/{NUL}", json={"mode": "READONLY"})) == (422, 42208)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ({"name": "x", "subject": "a\x00b", "version": 1}, "does not exist"),
        ({"name": "a\x00b", "subject": "s", "version": 1}, "reference name 'a\\x00b' is not valid"),
        ({"name": "n" * 513, "subject": "s", "version": 1}, "is not valid"),
        ({"name": "", "subject": "s", "version": 1}, "reference name '' is not valid"),
    ],
)
def test_references_the_store_cannot_hold_are_42201(
    api: TestClient, reference: dict[str, Any], message: str
) -> None:
    body = {"schema": V1, "references": [reference]}
    r = api.post(f"/subjects/{unique('refs')}/versions", json=body)
    assert error(r) == (422, 42201)
    assert message in r.json()["message"]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "record", "name": "1abc", "fields": []}, "at /name"),
        (
            {"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]},
            "at /fields/0/name",
        ),
        ({"type": "record", "name": "R", "namespace": "1ns", "fields": []}, "at /namespace"),
        ({"type": "fixed", "name": "F", "size": -1}, "at /size"),
        ({"type": "fixed", "name": "F", "size": "x"}, "at /size"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "at /symbols/1"),
        (
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "int", "default": 2**31}],
            },
            "at /fields/0/default",
        ),
    ],
)
def test_schemas_java_avro_refuses_get_42201_and_no_id(
    api: TestClient, schema: dict[str, Any], where: str
) -> None:
    s = unique("avro")
    text = orjson.dumps(schema).decode()
    for r in (
        api.post(f"/subjects/{s}/versions", json={"schema": text}),
        api.post(f"/compatibility/subjects/{s}/versions/latest", json={"schema": text}),
    ):
        assert error(r) == (422, 42201)
        assert r.json()["message"].startswith("Invalid schema: ")
        assert r.json()["message"].endswith(where)
    assert error(api.get(f"/subjects/{s}/versions")) == (404, 40401)
    # The database is this test's own: the first id is still free.
    assert register(api, unique("avro"), V1) == 1


SEGMENTS = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["latest", "-1", "+1", "0", "\x00", "a\x00b", "%", "..", "x" * 600]),
)
ROUTES = [
    ("GET", "/schemas/ids/{x}"),
    ("GET", "/schemas/ids/{x}/schema"),
    ("GET", "/schemas/ids/{x}/subjects"),
    ("GET", "/schemas/ids/{x}/versions"),
    ("GET", "/subjects/{x}/versions"),
    ("POST", "/subjects/{x}"),
    ("POST", "/subjects/{x}/versions"),
    ("DELETE", "/subjects/{x}"),
    ("GET", "/subjects/s/versions/{x}"),
    ("GET", "/subjects/{x}/versions/{x}/schema"),
    ("GET", "/subjects/s/versions/{x}/referencedby"),
    ("DELETE", "/subjects/s/versions/{x}"),
    ("POST", "/compatibility/subjects/s/versions/{x}"),
    ("POST", "/compatibility/subjects/{x}/versions"),
    ("GET", "/config/{x}"),
    ("PUT", "/config/{x}"),
    ("DELETE", "/config/{x}"),
    ("GET", "/mode/{x}"),
    ("PUT", "/mode/{x}"),
    ("DELETE", "/mode/{x}"),
]


def test_no_path_segment_is_a_server_error(api: TestClient) -> None:
    register(api, "s", V1)
    bodies = {"POST": {"schema": V2}, "PUT": {"compatibility": "NONE", "mode": "READWRITE"}}

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.sampled_from(ROUTES), SEGMENTS, st.sampled_from(["", "?deleted=true"]))
    def send(route: tuple[str, str], segment: str, query: str) -> None:
        method, template = route
        url = template.replace("{x}", quote(segment, safe="")) + query
        r = api.request(method, url, json=bodies.get(method))
        assert r.status_code < 500, (method, url, r.text[:300])
        assert r.status_code < 400 or set(r.json()) == {"error_code", "message"}

    send()


def test_a_subject_holding_a_schema_older_rules_took_still_evolves(api: TestClient) -> None:
    # Stored as an earlier release registered it, before field names were checked.
    legacy = '{"type":"record","name":"R","fields":[{"name":"a-b","type":"int"}]}'
    s = unique("legacy")
    registry = api.app.state.registry  # type: ignore[attr-defined]

    def store(tx: Transaction) -> None:
        schema_id = tx.allocate_id()
        key = fingerprint("AVRO", legacy, ())
        tx.insert_schema(
            StoredSchema(schema_id, "AVRO", legacy, ()), fingerprint=key, normalized_fingerprint=key
        )
        tx.insert_version(s, 1, schema_id)

    registry.store.write(store, s)
    evolved = legacy.replace("}]}", '},{"name":"b","type":"string","default":""}]}')
    check = api.post(f"/compatibility/subjects/{s}/versions/latest", json={"schema": evolved})
    # The new schema is judged by today's rules; the stored one is not judged again.
    assert error(check) == (422, 42201)
    assert check.json()["message"].endswith("at /fields/0/name")
    renamed = '{"type":"record","name":"R","fields":[{"name":"b","type":"string","default":""}]}'
    answer = api.post(f"/compatibility/subjects/{s}/versions/latest", json={"schema": renamed})
    assert answer.json() == {"is_compatible": True}
    assert register(api, s, renamed) == 2
    assert api.get(f"/subjects/{s}/versions/1").json()["schema"] == legacy
