"""Dependencies the routes share: the running app's :class:`Coordinator`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from headwater_coordinator.coordinator import Coordinator


async def get_coordinator(request: Request) -> Coordinator:
    # async: FastAPI would run a plain def dependency in a worker thread on every request
    coordinator: Coordinator = request.app.state.coordinator
    return coordinator


CoordinatorDep = Annotated[Coordinator, Depends(get_coordinator)]
