"""What the routes share: the domain core as a dependency, Confluent's path and query parameters.

Each dependency FastAPI solves costs a route about as much as a cached read; the core is the only
one. It is ``async def`` because FastAPI runs plain ``def`` dependencies in its thread pool, which
would cost a thread hop on every request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from headwater_registry.registry import Registry


async def get_registry(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


RegistryDep = Annotated[Registry, Depends(get_registry)]
Subject = Annotated[str, Path(description="subject name; '/' as %2F")]
"""A ``{subject:subject}`` path segment, with a ``/`` sent as ``%2F`` turned back."""
Flag = Annotated[bool, Query()]
"""A boolean query parameter (``true``/``True``/``1``...), false when absent."""
Offset = Annotated[int, Query(ge=0)]
Limit = Annotated[int, Query(description="-1 or 0: no limit")]
