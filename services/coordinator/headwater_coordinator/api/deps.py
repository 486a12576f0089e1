"""Dependencies the routes share (the running app's :class:`Coordinator`), and the errors every
route of a kind can answer with."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from headwater.errors import HeadwaterError, InvalidRequestError, MalformedRequestError
from headwater.groups.errors import InvalidGroupIdError, StoreUnavailableError
from headwater_coordinator.coordinator import Coordinator


async def get_coordinator(request: Request) -> Coordinator:
    # async: FastAPI would run a plain def dependency in a worker thread on every request
    coordinator: Coordinator = request.app.state.coordinator
    return coordinator


CoordinatorDep = Annotated[Coordinator, Depends(get_coordinator)]

GROUP_ERRORS: tuple[type[HeadwaterError], ...] = (InvalidGroupIdError, StoreUnavailableError)
"""Every route under ``/groups/{group_id}``: a group id the core refuses; Redis not answering."""

BODY_ERRORS: tuple[type[HeadwaterError], ...] = (MalformedRequestError, InvalidRequestError)
"""Every route with a JSON body: not JSON (400); a field of the wrong type or range (422)."""
