"""``JSONBody``: the JSON response class every service answers with, encoded by orjson."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse


class JSONBody(JSONResponse):
    """JSON encoded with orjson (several times faster than the stdlib for big bodies).

    A ``JSONResponse``, so FastAPI still documents each route's response model in OpenAPI.
    """

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
