"""install_error_handlers: every failure answers {"error_code", "message"} with its status."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from headwater.errors import (
    HeadwaterError,
    InvalidOffsetError,
    InvalidRequestError,
    TopicNotFoundError,
    UnsupportedMediaTypeError,
)
from headwater_kernel.errors import error_response, install_error_handlers

REGISTRY_JSON = "application/vnd.schemaregistry.v1+json"


class Item(BaseModel):
    name: str
    count: int


def build_app(
    media_type: str = "application/json",
    validation_error: Callable[[str], HeadwaterError] = InvalidRequestError,
) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, media_type=media_type, validation_error=validation_error)

    @app.get("/items/{item_id}")
    async def get_item(item_id: int) -> dict[str, int]:
        if item_id == 0:
            raise TopicNotFoundError("Topic 'zero' not found")
        if item_id == 1:
            raise RuntimeError("boom")
        return {"item_id": item_id}

    @app.post("/items")
    async def post_item(item: Item) -> Item:
        return item

    return app


def test_error_response_is_the_body_and_status_of_the_error() -> None:
    response = error_response(UnsupportedMediaTypeError("no XML"))
    assert response.status_code == 415
    assert response.media_type == "application/json"
    assert response.body == b'{"error_code":415,"message":"no XML"}'


def test_domain_errors_keep_their_code_and_status() -> None:
    client = TestClient(build_app())
    response = client.get("/items/0")
    assert response.status_code == 404
    assert response.json() == {"error_code": 40401, "message": "Topic 'zero' not found"}


def test_unhandled_errors_are_500_50000_without_details() -> None:
    client = TestClient(build_app(), raise_server_exceptions=False)
    response = client.get("/items/1")
    assert response.status_code == 500
    assert response.json() == {"error_code": 50000, "message": "Internal error: RuntimeError"}


def test_malformed_json_is_400_40002() -> None:
    client = TestClient(build_app())
    response = client.post(
        "/items", content=b'{"name": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json() == {"error_code": 40002, "message": "Malformed JSON in request body"}


def test_invalid_parameters_name_the_field_with_the_default_422_42200() -> None:
    client = TestClient(build_app())
    response = client.get("/items/seven")
    assert response.status_code == 422
    body = response.json()
    assert body["error_code"] == 42200
    assert body["message"].startswith("path.item_id: ")
    missing = client.post("/items", json={"name": "x"})
    assert missing.json()["error_code"] == 42200
    assert missing.json()["message"].startswith("body.count: ")


def test_a_service_chooses_the_error_for_invalid_parameters() -> None:
    def as_offset_error(message: str) -> HeadwaterError:
        return InvalidOffsetError(message)

    client = TestClient(build_app(validation_error=as_offset_error))
    response = client.get("/items/seven")
    assert response.status_code == 400
    assert response.json()["error_code"] == 40004


def test_unrouted_paths_and_methods_answer_in_the_same_shape() -> None:
    client = TestClient(build_app())
    missing = client.get("/nowhere")
    assert missing.status_code == 404
    assert missing.json() == {"error_code": 404, "message": "Not Found"}
    wrong_method = client.delete("/items/3")
    assert wrong_method.status_code == 405
    assert wrong_method.json() == {"error_code": 405, "message": "Method Not Allowed"}


def test_every_error_carries_the_services_media_type() -> None:
    client = TestClient(build_app(media_type=REGISTRY_JSON), raise_server_exceptions=False)
    for path in ("/items/0", "/items/1", "/items/seven", "/nowhere"):
        assert client.get(path).headers["content-type"] == REGISTRY_JSON, path
