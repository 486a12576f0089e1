"""Interactive API docs (``/docs``, ``/redoc``) whose assets come from a package, not a CDN.

FastAPI's own pages load Swagger UI and ReDoc from jsdelivr, so they are blank in an air-gapped
cluster. Here the same pages point at ``/docs/assets/...``, served from the files the
``fastapi-offline`` wheel ships (Swagger UI 5, which renders OpenAPI 3.1, and ReDoc), so the docs
work wherever the service runs.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
# The package's static folder: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js,
# favicon.png. Wheels are installed unpacked, so the resource is a real directory.
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def add_docs_routes(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Swagger UI at ``docs_url`` and ReDoc at ``redoc_url``, with their assets served locally.

    The app must be built with ``docs_url=None, redoc_url=None`` (FastAPI's CDN pages off).
    """
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    oauth2_redirect = f"{docs_url}/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=f"{root}{oauth2_redirect}",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
