"""The fetch route: stored batches as raw bytes, or decoded records as REST Proxy v2 JSON."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from headwater.errors import (
    EmbeddedFormatError,
    InvalidOffsetError,
    InvalidRequestError,
    NotAcceptableError,
    OffsetOutOfRangeError,
    PartitionNotFoundError,
    StorageError,
    TopicNotFoundError,
)
from headwater.types import Offset
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep
from headwater_broker.api.embedded import render_records
from headwater_broker.api.forward import at_leader
from headwater_broker.api.media import (
    BATCHES,
    JSON,
    KAFKA_BINARY,
    KAFKA_JSON,
    KAFKA_V2,
    negotiate,
)
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["fetch"])

# The json format under REST Proxy's v2 type, application/json or its own type; binary; batches.
_JSON_TYPES = (KAFKA_V2, JSON, KAFKA_JSON, KAFKA_BINARY)
_OFFERED = (*_JSON_TYPES, BATCHES)
_RECORDS_SCHEMA = {"type": "array", "items": {"$ref": "#/components/schemas/FetchedRecord"}}


@router.get(
    "/topics/{topic}/partitions/{partition}/records",
    response_model=list[models.FetchedRecord],
    responses={
        200: {
            "description": "Records (JSON types) or raw stored batches (batches type)",
            "content": {
                **{media: {"schema": _RECORDS_SCHEMA} for media in _JSON_TYPES},
                BATCHES: {"schema": {"type": "string", "format": "binary"}},
            },
            "headers": {
                "Headwater-High-Watermark": {"schema": {"type": "integer"}},
                "Headwater-Log-Start-Offset": {"schema": {"type": "integer"}},
                "Headwater-Next-Offset": {"schema": {"type": "integer"}},
            },
        },
        **models.error_responses(
            NotAcceptableError,
            EmbeddedFormatError,
            InvalidOffsetError,
            InvalidRequestError,
            TopicNotFoundError,
            PartitionNotFoundError,
            OffsetOutOfRangeError,
            StorageError,
            *models.AT_LEADER,
        ),
    },
    summary="Fetch from an offset; at the end, long-poll up to max_wait_ms (41601 out of range). "
    "Raw batches at the leader only (421 42101 elsewhere); JSON at any broker (relayed)",
)
async def fetch(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    request: Request,
    broker: BrokerDep,
    offset: Annotated[int, Query(ge=0)] = 0,
    max_bytes: Annotated[int, Query(ge=1)] = 1_048_576,
    max_wait_ms: Annotated[int, Query(ge=0, le=300_000)] = 0,
    max_records: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    media = negotiate(request.headers.get("accept"), _OFFERED)
    if media == BATCHES:
        data = await broker.reads.fetch(topic, partition, offset, max_bytes, max_wait_ms)
        bounds = (data.high_watermark, data.log_start_offset, data.next_offset)
        return Response(data.data, media_type=BATCHES, headers=_bound_headers(*bounds))
    if (relayed := await at_leader(request, broker, topic, partition)) is not None:
        return relayed
    fetched = await broker.reads.fetch_records(
        topic, partition, offset, max_bytes, max_wait_ms, max_records
    )
    rendered = render_records(topic, partition, fetched.records, media == KAFKA_BINARY)
    # An answer cut before a record the json format cannot show resumes at that record.
    stopped = rendered.stopped_at
    next_offset = fetched.next_offset if stopped is None else Offset(stopped)
    bounds = (fetched.high_watermark, fetched.log_start_offset, next_offset)
    return JSONBody(rendered.body, media_type=media, headers=_bound_headers(*bounds))


def _bound_headers(high_watermark: int, log_start: int, next_offset: int) -> dict[str, str]:
    return {
        "Headwater-High-Watermark": str(high_watermark),
        "Headwater-Log-Start-Offset": str(log_start),
        "Headwater-Next-Offset": str(next_offset),
    }
