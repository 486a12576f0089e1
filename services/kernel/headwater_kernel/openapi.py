"""How every service documents its errors in OpenAPI: the error body, and the codes per status.

A route lists the error classes it can answer with; :func:`error_responses` groups them by HTTP
status, each status with the error body's schema and one description line per code
(``- 40401: Topic not found.``), which the services' OpenAPI tests read back.
:func:`drop_validation_errors` removes the 422 FastAPI adds to every route with parameters: its
body is pydantic's error list, which no service sends.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from headwater.errors import HeadwaterError


class ErrorBody(BaseModel):
    """Every error: a stable code (REST Proxy's and Confluent's where they have one) and a
    message."""

    error_code: int
    message: str


def error_responses(
    *errors: type[HeadwaterError], retry_after: bool = False
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the errors a route can answer with: per status, the error body
    and the codes it carries; with ``retry_after``, a 503 also documents ``Retry-After``."""
    by_status: dict[int, list[type[HeadwaterError]]] = {}
    for error in sorted(set(errors), key=lambda e: e.error_code):
        by_status.setdefault(error.http_status, []).append(error)
    responses: dict[int | str, dict[str, Any]] = {}
    for status, group in sorted(by_status.items()):
        entry: dict[str, Any] = {
            "model": ErrorBody,
            "description": "\n".join(f"- {e.error_code}: {e.default_message()}" for e in group),
        }
        if status == 503 and retry_after:
            entry["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait before sending the request again",
                    "schema": {"type": "integer"},
                }
            }
        responses[status] = entry
    return responses


def drop_validation_errors(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` without FastAPI's generated 422 answers and their schemas (in place)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            answer = operation.get("responses", {}).get("422", {})
            schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
            if schema.get("$ref", "").endswith("/HTTPValidationError"):
                del operation["responses"]["422"]
    components = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return document
