"""What every service's OpenAPI test checks: a valid document, and answers documented as sent.

An error is documented per operation and status with the shared error body and one line per
code (``- 40401: Topic not found.``, :func:`headwater_kernel.openapi.error_responses`). The
broker's 421 documents the error body with the leader it names (``NotLeaderBody``).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
from openapi_spec_validator import validate

ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}
ERROR_BODIES = (ERROR_BODY, {"$ref": "#/components/schemas/NotLeaderBody"})
# Errors whose body names where to go instead: the partition's leader, the controller.
_NAMED = {
    (421, 42101): {"leader_id", "leader_url", "leader_epoch"},
    (503, 50305): {"controller_id", "controller_url"},
}


def check_document(document: dict[str, Any]) -> None:
    """Valid OpenAPI, every reference resolves, operation ids unique, no FastAPI 422 body."""
    validate(document)
    text = repr(document)
    refs = set(re.findall(r"'#/components/schemas/([^']+)'", text))
    assert refs <= set(document["components"]["schemas"]), refs - set(
        document["components"]["schemas"]
    )
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert "HTTPValidationError" not in document["components"]["schemas"]


def documented_errors(document: dict[str, Any], method: str, template: str) -> set[tuple[int, int]]:
    """The (status, code) pairs the document lists for an operation's error answers."""
    pairs = set()
    operation = document["paths"][template][method.lower()]
    for status, answer in operation["responses"].items():
        if int(status) < 400 or template in ("/readyz",):
            continue
        for media, content in answer["content"].items():
            assert content["schema"] in ERROR_BODIES, (method, template, status, media)
        codes = re.findall(r"^- (\d+): \S", answer["description"], re.MULTILINE)
        assert codes, (method, template, status)
        pairs |= {(int(status), int(code)) for code in codes}
    return pairs


def check_answer(
    document: dict[str, Any], method: str, template: str, response: httpx.Response
) -> tuple[int, int]:
    """(status, error code) of an answer, once its status and media type are found documented
    for the operation (code 0 for a success); an error must have the error body."""
    operation = document["paths"][template][method.lower()]
    answer = operation["responses"].get(str(response.status_code))
    assert answer is not None, (method, template, response.status_code, response.text[:200])
    media = response.headers.get("content-type", "").split(";")[0]
    if not answer.get("content"):
        assert not response.content, (method, template, response.status_code)
        return response.status_code, 0
    assert media in answer["content"], (method, template, response.status_code, media)
    if response.status_code < 400:
        return response.status_code, 0
    body = response.json()
    extra = _NAMED.get((response.status_code, int(body.get("error_code", 0))), set())
    assert set(body) == {"error_code", "message", *extra}, body
    code = int(body["error_code"])
    assert (response.status_code, code) in documented_errors(document, method, template), (
        method,
        template,
        response.status_code,
        code,
    )
    return response.status_code, code
