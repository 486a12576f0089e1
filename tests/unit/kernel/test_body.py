"""JSONBody: compact UTF-8 JSON from orjson, with the status and media type asked for."""

from __future__ import annotations

from headwater_kernel.body import JSONBody


def test_renders_compact_utf8_json() -> None:
    response = JSONBody({"topic": "café", "offsets": [0, 1], "key": None}, status_code=201)
    assert response.body == '{"topic":"café","offsets":[0,1],"key":null}'.encode()
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"


def test_keeps_a_vendor_media_type() -> None:
    response = JSONBody([], media_type="application/vnd.kafka.v2+json")
    assert response.headers["content-type"] == "application/vnd.kafka.v2+json"
    assert response.body == b"[]"
