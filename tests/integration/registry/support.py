"""What the registry API tests share: example schemas and short forms of the calls they make."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.testclient import TestClient

MEDIA = "application/vnd.schemaregistry.v1+json"


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


def record(name: str) -> str:
    # Sent pretty-printed; the registry keeps and answers the compact form.
    body = {"type": "record", "name": name, "fields": [{"name": "a", "type": "long"}]}
    return orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()


def compact(name: str) -> str:
    return orjson.dumps(orjson.loads(record(name))).decode()


def post(api: TestClient, path: str, body: Any, **params: Any) -> Any:
    return api.post(path, json=body, params=params)


def register(api: TestClient, subject: str, schema: str, **extra: Any) -> int:
    r = api.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


def error(response: Any) -> tuple[int, int]:
    return response.status_code, response.json()["error_code"]


def answer(api: TestClient, path: str, **params: Any) -> tuple[int, Any]:
    r = api.get(path, params=params)
    body = r.json()
    if r.status_code != 200:
        return r.status_code, body["error_code"]
    return 200, body["version"] if isinstance(body, dict) and "version" in body else body
