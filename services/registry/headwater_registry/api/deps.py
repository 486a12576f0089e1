"""What the routes share: the domain core as a dependency, Confluent's path and query parameters.

Each dependency FastAPI solves costs a route about as much as a cached read; the core is the only
one. It is ``async def`` because FastAPI runs plain ``def`` dependencies in its thread pool, which
would cost a thread hop on every request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request

from headwater_registry.registry import Registry


async def get_registry(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


RegistryDep = Annotated[Registry, Depends(get_registry)]
Subject = Annotated[str, Path(description="subject name; '/' as %2F")]
"""A ``{subject:subject}`` path segment, with a ``/`` sent as ``%2F`` turned back."""


def _documented_as(schema: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Pydantic's ``json_schema_extra`` that documents a text parameter as what it holds.

    Routes take these segments as text and read them in the core, as Confluent does, so that no
    text is a validation error of FastAPI's (Confluent answers 40403 or 42202) -- yet the
    document should say what a valid value is.
    """

    def replace(generated: dict[str, Any]) -> None:
        description = generated.get("description")
        generated.clear()
        generated.update(schema)
        if description:
            generated["description"] = description

    return replace


SchemaIdPath = Annotated[
    str,
    Path(
        description="global schema id, a 32-bit integer; anything else names no schema (40403)",
        json_schema_extra=_documented_as({"type": "integer", "format": "int32"}),
    ),
]
"""An ``{id}`` path segment: read by ``names.parse_schema_id``, so no text is a 422 or a 500."""
Version = Annotated[
    str,
    Path(
        description="version number (1 to 2^31-1), 'latest' or -1 for the newest; else 42202",
        json_schema_extra=_documented_as(
            {
                "anyOf": [
                    {"type": "integer", "format": "int32", "minimum": 1},
                    {"type": "integer", "enum": [-1]},
                    {"type": "string", "enum": ["latest"]},
                ]
            }
        ),
    ),
]
"""A ``{version}`` path segment, read by ``names.parse_version`` in the core."""
Flag = Annotated[bool, Query()]
"""A boolean query parameter (``true``/``True``/``1``...), false when absent."""
Offset = Annotated[int, Query(ge=0)]
Limit = Annotated[int, Query(description="-1 or 0: no limit")]
