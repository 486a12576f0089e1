"""Errors as HTTP answers: every exception becomes ``{"error_code", "message"}`` with its status.

Domain code raises :class:`headwater.errors.HeadwaterError` subclasses; the handlers installed
here are the only place they meet HTTP, so no route or core raises ``HTTPException``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import compile_path

from headwater.errors import (
    HeadwaterError,
    InvalidRequestError,
    MalformedRequestError,
    UnknownServerError,
)
from headwater_kernel.body import JSONBody

log = logging.getLogger("headwater_kernel.errors")


def error_response(error: HeadwaterError, media_type: str = "application/json") -> Response:
    """The ``{"error_code", "message"}`` answer for ``error``, with its HTTP status."""
    return JSONBody(error.to_body(), status_code=error.http_status, media_type=media_type)


def allowed_methods(request: Request, starlette_allow: str = "") -> list[str]:
    """Every method the app serves at the request's path, as its OpenAPI document lists them.

    Starlette's own 405 names only the first route whose path matched, and a path often has
    several (``GET`` and ``DELETE /groups/{g}`` are two routes).
    """
    methods = {m.strip() for m in starlette_allow.split(",") if m.strip()}
    path = request.scope["path"]
    for template, operations in request.app.openapi()["paths"].items():
        if compile_path(template)[0].match(path):
            methods |= {method.upper() for method in operations}
    return sorted(methods)


def install_error_handlers(
    app: FastAPI,
    *,
    media_type: str = "application/json",
    validation_error: Callable[[str], HeadwaterError] = InvalidRequestError,
) -> None:
    """Map every error to ``{"error_code", "message"}`` with its HTTP status.

    ``validation_error`` builds the error for a request FastAPI itself rejects (bad JSON body, a
    query parameter of the wrong type): a service picks the code its API documents for that.
    """

    async def on_headwater_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HeadwaterError)
        return error_response(exc, media_type)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(
                MalformedRequestError("Malformed JSON in request body"), media_type
            )
        parts = []
        for e in errors[:5]:
            where = ".".join(str(p) for p in e.get("loc", ()))
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        return error_response(validation_error("; ".join(parts) or "Invalid request"), media_type)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        body = {"error_code": exc.status_code, "message": str(exc.detail)}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # RFC 9110: a 405 names every method the resource allows
            headers["Allow"] = ", ".join(allowed_methods(request, headers.get("Allow", "")))
        return JSONBody(body, status_code=exc.status_code, media_type=media_type, headers=headers)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(
            UnknownServerError(f"Internal error: {type(exc).__name__}"), media_type
        )

    app.add_exception_handler(HeadwaterError, on_headwater_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
