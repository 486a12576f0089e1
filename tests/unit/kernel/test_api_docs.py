"""/docs and /redoc load every asset from the service itself, so they work without internet."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from headwater_kernel.api_docs import ASSETS, ASSETS_DIR
from headwater_kernel.app import create_service_app

# src, href and spec-url attributes, and the url the Swagger UI script loads the spec from.
_REFERENCES = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|url: ?["']([^"']+)["']""")


def references(html: str) -> list[str]:
    return [a or b for a, b in _REFERENCES.findall(html)]


def test_swagger_ui_page_refers_only_to_this_service() -> None:
    client = TestClient(create_service_app(title="Headwater thing", description="x"))
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "Headwater thing - Swagger UI" in page.text
    refs = references(page.text)
    assert sorted(refs) == [
        "/docs/assets/favicon.png",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
        "/openapi.json",
    ]
    assert "cdn." not in page.text
    assert "https://" not in page.text


def test_redoc_page_refers_only_to_this_service() -> None:
    client = TestClient(create_service_app(title="Headwater thing", description="x"))
    page = client.get("/redoc")
    assert page.status_code == 200
    assert sorted(references(page.text)) == [
        "/docs/assets/favicon.png",
        "/docs/assets/redoc.standalone.js",
        "/openapi.json",
    ]
    assert "fonts.googleapis.com" not in page.text


def test_every_asset_is_served_from_the_package() -> None:
    client = TestClient(create_service_app(title="t", description="x"))
    for name in ASSETS:
        answer = client.get(f"/docs/assets/{name}")
        assert answer.status_code == 200, name
        assert answer.content == (ASSETS_DIR / name).read_bytes()
    bundle = client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    # Swagger UI 5 renders OpenAPI 3.1, the version FastAPI writes; 4.x shows an error instead.
    assert re.search(r'"5\.\d+\.\d+"', bundle.text)
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    assert client.get("/docs/assets/../health.py").status_code == 404


def test_oauth2_redirect_page_is_served() -> None:
    client = TestClient(create_service_app(title="t", description="x"))
    answer = client.get("/docs/oauth2-redirect")
    assert answer.status_code == 200
    assert "oauth2" in answer.text
