"""The broker's OpenAPI document, made to tell the truth about what the routes answer.

FastAPI's own document is changed in four ways: its generated 422 (pydantic's error list,
which the broker never sends) is dropped; the REST produce body's models, which the routes read
themselves rather than through FastAPI, are added to the components their references point at;
every JSON answer of the REST routes, success or error, is listed under each media type
:class:`~headwater_broker.api.media.NegotiatedJSON` can label it with; and a created topic links
to the operations on it (OpenAPI links: what a client, or a stateful fuzzer, does next).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from headwater_broker.api import models
from headwater_broker.api.media import JSON, JSON_ANSWERS, KERNEL_PATHS
from headwater_kernel.openapi import drop_validation_errors

_BODY_MODELS = (models.ProduceRequest,)
_TOPIC = "/topics/{topic}"
_PARTITION = "/topics/{topic}/partitions/{partition}"
# (method, path) of the operations a created topic links to; partition 0 always exists.
_ON_A_TOPIC = [
    ("get", _TOPIC),
    ("post", _TOPIC),
    ("delete", _TOPIC),
    ("patch", _TOPIC + "/configs"),
    ("post", _TOPIC + "/partitions"),
    ("get", _TOPIC + "/partitions"),
    ("post", _PARTITION),
    ("get", _PARTITION + "/offsets"),
    ("get", _PARTITION + "/records"),
]


def document(app: FastAPI) -> dict[str, Any]:
    """The document ``GET /openapi.json`` serves (built once, then kept)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = drop_validation_errors(FastAPI.openapi(app))  # keeps app.openapi_schema
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for model in _BODY_MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components.setdefault(model.__name__, schema)
    for path, operations in doc.get("paths", {}).items():
        if path.startswith(KERNEL_PATHS):
            continue
        for operation in operations.values():
            for answer in operation.get("responses", {}).values():
                content = answer.get("content", {})
                if JSON in content:
                    for media in JSON_ANSWERS:
                        content.setdefault(media, content[JSON])
    _link_created_topics(doc)
    return doc


def _link_created_topics(doc: dict[str, Any]) -> None:
    paths = doc.get("paths", {})
    created = paths.get("/topics", {}).get("post", {}).get("responses", {}).get("201")
    if created is None:
        return
    links = created.setdefault("links", {})
    for method, path in _ON_A_TOPIC:
        operation = paths.get(path, {}).get(method)
        if operation is None:
            continue
        parameters: dict[str, Any] = {"topic": "$response.body#/name"}
        if "{partition}" in path:
            parameters["partition"] = "0"  # OpenAPI 3.1 link parameters are strings
        links[operation["operationId"]] = {
            "operationId": operation["operationId"],
            "parameters": parameters,
        }
