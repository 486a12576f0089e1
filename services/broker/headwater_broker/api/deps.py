"""Dependencies the routes share: the broker domain object and JSON content-type checks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from headwater_broker.api.media import JSON, KAFKA_V2, accept_json, require_content_type
from headwater_broker.broker import Broker


async def get_broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


async def json_body(request: Request) -> None:
    """Admin bodies are JSON (415 41501 otherwise); runs before FastAPI parses the body."""
    require_content_type(request, (JSON, KAFKA_V2))


async def json_answer(request: Request) -> None:
    """The answer is JSON: 406 40601 unless the Accept header allows it."""
    accept_json(request)


BrokerDep = Annotated[Broker, Depends(get_broker)]
JSONBodyDep = Depends(json_body)
JSONAnswerDep = Depends(json_answer)
