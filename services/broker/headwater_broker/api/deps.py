"""Dependencies the routes share: the broker domain object and JSON content-type checks."""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import Depends, Request

from headwater.errors import ServiceUnavailableError
from headwater_broker.api.media import JSON, KAFKA_V2, accept_json, require_content_type
from headwater_broker.broker import Broker
from headwater_broker.peers import METADATA_OFFSET


async def get_broker(request: Request) -> Broker:
    """The broker; a request relayed by a peer first waits (briefly) for this broker's metadata
    to reach the change the peer's reflected, so both judge it by the same metadata."""
    broker: Broker = request.app.state.broker
    seen = request.headers.get(METADATA_OFFSET, "")
    if seen.isdigit() and broker.is_open:
        with contextlib.suppress(TimeoutError, ServiceUnavailableError):
            if broker.image.offset < int(seen):
                await broker.node.follower.wait_for(int(seen), 2.0)
                await broker.replicas_settled()
    return broker


async def json_body(request: Request) -> None:
    """Admin bodies are JSON (415 415 otherwise); runs before FastAPI parses the body."""
    require_content_type(request, (JSON, KAFKA_V2))


async def json_answer(request: Request) -> None:
    """The answer is JSON: 406 40601 unless the Accept header allows it."""
    accept_json(request)


BrokerDep = Annotated[Broker, Depends(get_broker)]
JSONBodyDep = Depends(json_body)
JSONAnswerDep = Depends(json_answer)
