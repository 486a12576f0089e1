"""The OpenAPI document tells the truth: every answer a route gives, and only those, is in it.

The document must be valid OpenAPI; then a scenario sends each operation good and bad requests
-- and its good requests again over a store whose tables are gone -- and every answer's status
and media type must be documented for its operation, an error with the error body and its
``error_code`` named; every error code documented for an operation must have been seen.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headwater_registry.app import create_app
from headwater_registry.settings import RegistrySettings
from tests.integration.registry.support import MEDIA, V1, V2, rec
from tests.openapi_document import check_document

V3 = rec("R", ("a", "int"), ("b", "string", ""), ("c", "string", ""))
BAD = rec("R", ("a", "int"), ("z", "string"))
LARGE = '{"type":"string","doc":"' + "x" * (1 << 20) + '"}'
BASE = rec("Base", ("id", "long"))
USER = '{"type":"record","name":"User","fields":[{"name":"b","type":"Base"}]}'
NESTED_BODY = b'{"schema":' + b"[" * 5000 + b"]" * 5000 + b"}"


@dataclass(frozen=True)
class Call:
    """One request: the operation it is for, and the error code it must get (0: a success)."""

    method: str
    template: str
    code: int | str = 0
    subject: str = "s1"
    version: str = "1"
    schema_id: str = "1"
    params: dict[str, str] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None

    def url(self) -> str:
        path = self.template.replace("{subject}", self.subject)
        return path.replace("{version}", self.version).replace("{id}", self.schema_id)


SUBJECT = "/subjects/{subject}"
VERSIONS = "/subjects/{subject}/versions"
VERSION = "/subjects/{subject}/versions/{version}"
CHECK_ONE = "/compatibility/subjects/{subject}/versions/{version}"
CHECK_ALL = "/compatibility/subjects/{subject}/versions"
BY_ID = "/schemas/ids/{id}"
MAYBE = {"deleted": "maybe"}


def bad_bodies(method: str, template: str, field: str = "schema", **at: Any) -> list[Call]:
    """The body errors every route with a body answers: not JSON, unreadable, wrong shape."""
    return [
        Call(method, template, 40002, content=b"{nope", **at),
        Call(method, template, 400, content=NESTED_BODY, **at),
        Call(method, template, 422, json={field: [1]}, **at),
    ]


def schema_errors(method: str, template: str, **at: Any) -> list[Call]:
    return [
        Call(method, template, 42201, json={"schema": '{"type":"nope"}'}, **at),
        Call(method, template, 42209, json={"schema": LARGE}, **at),
    ]


SCENARIO: list[Call] = [
    Call("GET", "/"),
    Call("GET", "/contexts"),
    Call("GET", "/schemas/types"),
    Call("GET", "/healthz"),
    Call("GET", "/readyz"),
    Call("GET", "/metrics"),
    # Registration, and the subjects the rest uses: s1 (V1, V2), base <- user, del, dv, ro, imp.
    Call("POST", VERSIONS, json={"schema": V1}),
    Call("POST", VERSIONS, json={"schema": V2}),
    Call("POST", VERSIONS, 40901, json={"schema": BAD}),
    *bad_bodies("POST", VERSIONS),
    *schema_errors("POST", VERSIONS),
    Call("POST", VERSIONS, 422, params={"normalize": "maybe"}, json={"schema": V1}),
    Call("POST", VERSIONS, 42202, json={"schema": V3, "version": 7}),
    Call("POST", VERSIONS, 42205, json={"schema": V3, "id": 5}),
    Call("POST", VERSIONS, 42208, subject="a%0Ab", json={"schema": V1}),
    Call("POST", VERSIONS, subject="base", json={"schema": BASE}),
    Call(
        "POST",
        VERSIONS,
        subject="user",
        json={"schema": USER, "references": [{"name": "Base", "subject": "base", "version": 1}]},
    ),
    Call("POST", VERSIONS, subject="del", json={"schema": V1}),
    Call("POST", VERSIONS, subject="dv", json={"schema": V1}),
    Call("POST", VERSIONS, subject="dv", json={"schema": V2}),
    Call("POST", VERSIONS, subject="ro", json={"schema": V1}),
    Call("PUT", "/mode/{subject}", subject="ro", json={"mode": "READONLY"}),
    Call("PUT", "/mode/{subject}", subject="imp", json={"mode": "IMPORT"}),
    Call("POST", VERSIONS, 42207, subject="imp", json={"schema": V1, "id": 99}),
    # Lookup.
    Call("POST", SUBJECT, json={"schema": V1}),
    Call("POST", SUBJECT, 40401, subject="nobody", json={"schema": V1}),
    Call("POST", SUBJECT, 40403, json={"schema": V3}),
    Call("POST", SUBJECT, 422, params=MAYBE, json={"schema": V1}),
    *bad_bodies("POST", SUBJECT),
    *schema_errors("POST", SUBJECT),
    # Listings and reads.
    Call("GET", "/subjects"),
    Call("GET", "/subjects", 422, params={"offset": "-1"}),
    Call("GET", VERSIONS),
    Call("GET", VERSIONS, 40401, subject="nobody"),
    Call("GET", VERSIONS, 422, params=MAYBE),
    *(
        call
        for template in (VERSION, VERSION + "/schema")
        for call in (
            Call("GET", template),
            Call("GET", template, 40401, subject="nobody"),
            Call("GET", template, 40402, version="99"),
            Call("GET", template, 42202, version="0"),
            Call("GET", template, 42202, version="9223372036854775808"),
            Call("GET", template, 422, params=MAYBE),
        )
    ),
    Call("GET", VERSION + "/referencedby", subject="base"),
    Call("GET", VERSION + "/referencedby", 40401, subject="nobody"),
    Call("GET", VERSION + "/referencedby", 40402, version="99"),
    Call("GET", VERSION + "/referencedby", 42202, version="latest2"),
    *(
        call
        for template in (BY_ID, BY_ID + "/schema", BY_ID + "/subjects", BY_ID + "/versions")
        for call in (
            Call("GET", template),
            Call("GET", template, 40403, schema_id="999"),
            Call("GET", template, 40403, schema_id="9223372036854775808"),
            Call("GET", template, 40403, schema_id="abc"),
        )
    ),
    Call("GET", BY_ID + "/subjects", 422, params=MAYBE),
    Call("GET", BY_ID + "/versions", 422, params=MAYBE),
    Call("GET", "/schemas"),
    Call("GET", "/schemas", 422, params={"limit": "many"}),
    # Compatibility.
    Call("POST", CHECK_ONE, version="latest", json={"schema": V3}),
    Call("POST", CHECK_ONE, 40401, subject="nobody", json={"schema": V3}),
    Call("POST", CHECK_ONE, 40402, version="99", json={"schema": V3}),
    Call("POST", CHECK_ONE, 42202, version="0", json={"schema": V3}),
    Call("POST", CHECK_ONE, 422, params={"verbose": "maybe"}, json={"schema": V3}),
    *bad_bodies("POST", CHECK_ONE),
    *schema_errors("POST", CHECK_ONE),
    Call("POST", CHECK_ALL, json={"schema": V3}),
    Call("POST", CHECK_ALL, 422, params={"verbose": "maybe"}, json={"schema": V3}),
    *bad_bodies("POST", CHECK_ALL),
    *schema_errors("POST", CHECK_ALL),
    # Config.
    Call("GET", "/config"),
    Call("GET", "/config", 422, params={"defaultToGlobal": "maybe"}),
    Call("PUT", "/config", json={"compatibility": "BACKWARD"}),
    Call("PUT", "/config", 42203, json={"compatibility": "SIDEWAYS"}),
    *bad_bodies("PUT", "/config", "compatibility"),
    Call("DELETE", "/config"),
    Call("PUT", "/config/{subject}", subject="cfg", json={"compatibility": "NONE"}),
    Call("PUT", "/config/{subject}", 42203, subject="cfg", json={"compatibility": "SIDEWAYS"}),
    Call("PUT", "/config/{subject}", 42208, subject="a%0Ab", json={"compatibility": "NONE"}),
    *bad_bodies("PUT", "/config/{subject}", "compatibility"),
    Call("GET", "/config/{subject}", subject="cfg"),
    Call("GET", "/config/{subject}", 40408, subject="nobody"),
    Call("GET", "/config/{subject}", 422, params={"defaultToGlobal": "maybe"}),
    Call("DELETE", "/config/{subject}", subject="cfg"),
    Call("DELETE", "/config/{subject}", 40408, subject="cfg"),
    # Mode.
    Call("GET", "/mode"),
    Call("GET", "/mode", 422, params={"defaultToGlobal": "maybe"}),
    Call("PUT", "/mode", json={"mode": "READWRITE"}),
    Call("PUT", "/mode", 42204, json={"mode": "SOMETIMES"}),
    Call("PUT", "/mode", 42205, json={"mode": "IMPORT"}),
    *bad_bodies("PUT", "/mode", "mode"),
    Call("DELETE", "/mode"),
    Call("GET", "/mode/{subject}", subject="ro"),
    Call("GET", "/mode/{subject}", 40409, subject="nobody"),
    Call("GET", "/mode/{subject}", 422, params={"defaultToGlobal": "maybe"}),
    Call("PUT", "/mode/{subject}", 42204, json={"mode": "SOMETIMES"}),
    Call("PUT", "/mode/{subject}", 42205, json={"mode": "IMPORT"}),
    Call("PUT", "/mode/{subject}", 42208, subject="a%0Ab", json={"mode": "READONLY"}),
    *bad_bodies("PUT", "/mode/{subject}", "mode"),
    Call("DELETE", "/mode/{subject}", 40409, subject="nobody"),
    # Deletes: versions of dv, the subject del, read-only ro, referenced base.
    Call("DELETE", VERSION, 40407, subject="dv", params={"permanent": "true"}),
    Call("DELETE", VERSION, subject="dv"),
    Call("DELETE", VERSION, 40406, subject="dv"),
    Call("DELETE", VERSION, subject="dv", params={"permanent": "true"}),
    Call("DELETE", VERSION, 40402, subject="dv", version="99"),
    Call("DELETE", VERSION, 40401, subject="nobody"),
    Call("DELETE", VERSION, 42202, subject="dv", version="0"),
    Call("DELETE", VERSION, 422, subject="dv", version="2", params={"permanent": "maybe"}),
    Call("DELETE", VERSION, 42205, subject="ro"),
    Call("DELETE", VERSION, 42206, subject="base"),
    Call("DELETE", SUBJECT, 40405, subject="del", params={"permanent": "true"}),
    Call("DELETE", SUBJECT, subject="del"),
    Call("DELETE", SUBJECT, 40404, subject="del"),
    Call("DELETE", SUBJECT, subject="del", params={"permanent": "true"}),
    Call("DELETE", SUBJECT, 40401, subject="nobody"),
    Call("DELETE", SUBJECT, 422, subject="dv", params={"permanent": "maybe"}),
    Call("DELETE", SUBJECT, 42205, subject="ro"),
    Call("DELETE", SUBJECT, 42206, subject="base"),
    Call("DELETE", "/mode/{subject}", subject="ro"),
]
STORE_FREE = {("GET", "/"), ("GET", "/schemas/types"), ("GET", "/healthz"), ("GET", "/metrics")}
STORE_FREE |= {("GET", "/readyz")}  # its ping needs no table


@pytest.fixture
def registry_app(tmp_path: Path) -> Iterator[TestClient]:
    settings = RegistrySettings(database_url=f"sqlite:///{tmp_path / 'registry.db'}")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_the_document_is_valid_openapi(registry_app: TestClient) -> None:
    document = registry_app.get("/openapi.json").json()
    check_document(document)
    ready = document["paths"]["/readyz"]["get"]["responses"]
    assert ready["503"]["content"]["application/json"]["schema"]["required"] == ["status"]
    components = document["components"]["schemas"]
    assert "HTTPValidationError" not in components


def test_every_answer_is_documented_and_every_documented_error_is_given(
    registry_app: TestClient, tmp_path: Path
) -> None:
    document = registry_app.get("/openapi.json").json()
    seen: dict[tuple[str, str], set[int]] = {}
    for call in SCENARIO:
        r = registry_app.request(
            call.method, call.url(), params=call.params, json=call.json, content=call.content
        )
        code = _check_documented(document, call, r)
        assert code == call.code, (call, r.status_code, r.text[:300])
        seen.setdefault((call.method, call.template), set()).add(code)
    # The same operations over a store whose tables are gone: 50001 (reads) or 50002 (writes,
    # which retry first: twice here, not the default 30 that take 2.5 s each) -- each documented.
    broken = RegistrySettings(database_url=f"sqlite:///{tmp_path / 'broken.db'}", write_attempts=2)
    with TestClient(create_app(broken), raise_server_exceptions=False) as client:
        with sqlite3.connect(tmp_path / "broken.db") as db:
            for table in ("schema_references", "subject_versions", "schemas", "configs", "modes"):
                db.execute(f"DROP TABLE {table}")
        for call in {(c.method, c.template): c for c in SCENARIO if c.code == 0}.values():
            r = client.request(call.method, call.url(), params=call.params, json=call.json)
            code = _check_documented(document, call, r)
            if (call.method, call.template) in STORE_FREE:
                assert code == 0, (call, r.text)
            else:
                assert code in (50001, 50002), (call, r.status_code, r.text[:300])
                seen[(call.method, call.template)].add(500)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            key = (method.upper(), path)
            assert key in seen, f"{key} not exercised"
            documented = {
                int(code)
                for status, answer in operation["responses"].items()
                if status != "200" and status != "503"
                for code in re.findall(r"(\d+): ", answer.get("description", ""))
            }
            given = seen[key]
            if 500 in given:
                documented -= {50001, 50002}
                given = given - {500}
            assert documented == given - {0}, key


def _check_documented(document: dict[str, Any], call: Call, r: Any) -> int:
    """The error code of an answer (0 for a success), once it is found documented."""
    operation = document["paths"][call.template][call.method.lower()]
    answer = operation["responses"].get(str(r.status_code))
    assert answer is not None, (call, r.status_code, r.text[:200])
    media = r.headers["content-type"].split(";")[0]
    assert media in answer["content"], (call, media)
    if r.status_code < 400:
        if media.endswith("json"):
            assert media == ("application/json" if call.template in _KERNEL else MEDIA)
        return 0
    assert answer["content"][media]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    body = r.json()
    assert set(body) == {"error_code", "message"}, body
    code = int(body["error_code"])
    assert f"{code}: " in answer["description"], (call, code, answer["description"])
    return code


_KERNEL = {"/healthz", "/readyz"}
