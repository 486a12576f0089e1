"""Produce routes: REST Proxy v2 records, the raw batch fast path, idempotent producer ids."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from headwater.errors import (
    CorruptRecordError,
    EmptyProduceError,
    HeadwaterError,
    IdempotencyKeyConflictError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTopicError,
    MalformedRequestError,
    MetadataUnavailableError,
    NotAcceptableError,
    OutOfOrderSequenceError,
    PartitionNotFoundError,
    RecordTooLargeError,
    RelayOutcomeUnknownError,
    RequestTooLargeError,
    ServiceUnavailableError,
    StorageError,
    TopicNotFoundError,
    UnknownProducerIdError,
    UnsupportedMediaTypeError,
)
from headwater_broker import idempotency
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONAnswerDep, JSONBodyDep
from headwater_broker.api.embedded import ProduceBody
from headwater_broker.api.forward import forwarded
from headwater_broker.api.media import (
    BATCH_TYPES,
    BATCHES,
    EMBEDDED_FORMATS,
    accept_json,
    read_body,
    require_content_type,
)
from headwater_broker.appends import Acks
from headwater_broker.broker import Broker
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["produce"])

# What any request with a body can be answered: too large (413 41301), of another type (415),
# an Accept that allows no JSON answer (406); a path partition that is no integer (422 42200).
_REQUEST: tuple[type[HeadwaterError], ...] = (
    RequestTooLargeError,
    UnsupportedMediaTypeError,
    NotAcceptableError,
)
# A produce may create its topic first (BROKER_AUTO_CREATE_TOPICS), at the controller; before
# that, one that reaches a broker closing (shutting down, or replaced by a process that took its
# id) is refused, 503 50301, nothing written (a REST produce relays a leader's 50301 as well).
_AUTO_CREATE: tuple[type[HeadwaterError], ...] = (
    ServiceUnavailableError,
    InvalidTopicError,
    *models.AT_CONTROLLER,
)
_RECORDS: tuple[type[HeadwaterError], ...] = (
    *_REQUEST,
    *_AUTO_CREATE,
    *models.AT_LEADER,
    *models.REPLICATED,  # answered with acks=all, as REST Proxy's producer
    RelayOutcomeUnknownError,
    IdempotencyKeyConflictError,
    InvalidRequestError,
    MalformedRequestError,
    EmptyProduceError,
    InvalidRecordError,
    TopicNotFoundError,
    PartitionNotFoundError,
    RecordTooLargeError,
    StorageError,
)


_RECORDS_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            media: {"schema": {"$ref": "#/components/schemas/ProduceRequest"}}
            for media in EMBEDDED_FORMATS
        },
    }
}
_BATCHES_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "One or more Kafka RecordBatch v2 (magic 2), concatenated; any codec",
        "content": {m: {"schema": {"type": "string", "format": "binary"}} for m in BATCH_TYPES},
    }
}


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=idempotency.HEADER,
        description="Makes a retry safe: a request with a key used within "
        "BROKER_IDEMPOTENCY_KEY_WINDOW_MS is answered with the first one's offsets, at any "
        "broker and across a leader change, instead of storing the records again (409 40910 "
        "if its records differ); 1-255 visible ASCII characters",
    ),
]


async def _produce(
    request: Request, broker: Broker, topic: str, partition: int | None, key: str | None
) -> Response:
    fmt = EMBEDDED_FORMATS[require_content_type(request, tuple(EMBEDDED_FORMATS))]
    media = accept_json(request)
    if key is not None:
        idempotency.validate(key)
    body = await read_body(request, broker.settings.max_request_bytes)
    source = ProduceBody(bytes(body), fmt)
    offsets = await broker.appends.produce(
        topic, partition, source, forwarded=forwarded(request), idempotency_key=key
    )
    answer = [{"partition": p, "offset": o, "error_code": None, "error": None} for p, o in offsets]
    content = {"offsets": answer, "key_schema_id": None, "value_schema_id": None}
    return JSONBody(content, media_type=media)


@router.post(
    "/topics/{topic}",
    response_model=models.ProduceResponse,
    openapi_extra=_RECORDS_BODY,
    responses=models.error_responses(*_RECORDS),
    summary="Produce records (REST Proxy v2): keyed by murmur2, unkeyed sticky; any broker "
    "(records for partitions led elsewhere are relayed to their leaders)",
)
async def produce(
    topic: models.TopicName, request: Request, broker: BrokerDep, key: IdempotencyKey = None
) -> Response:
    return await _produce(request, broker, topic, None, key)


@router.post(
    "/topics/{topic}/partitions/{partition}",
    response_model=models.ProduceResponse,
    openapi_extra=_RECORDS_BODY,
    responses=models.error_responses(*_RECORDS),
    summary="Produce records to one partition (REST Proxy v2)",
)
async def produce_to_partition(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    request: Request,
    broker: BrokerDep,
    key: IdempotencyKey = None,
) -> Response:
    return await _produce(request, broker, topic, partition, key)


@router.post(
    "/topics/{topic}/partitions/{partition}/batches",
    response_model=models.BatchesResponse,
    openapi_extra=_BATCHES_BODY,
    responses={
        204: {"description": "acks=0: appended, no body"},
        **models.error_responses(
            *_REQUEST,
            *_AUTO_CREATE,
            *models.AT_LEADER,
            *models.REPLICATED,
            CorruptRecordError,
            InvalidRecordError,
            InvalidRequestError,
            TopicNotFoundError,
            PartitionNotFoundError,
            UnknownProducerIdError,
            OutOfOrderSequenceError,
            InvalidProducerEpochError,
            RecordTooLargeError,
            StorageError,
        ),
    },
    summary="Append raw RecordBatch v2 bytes (the fast path, at the partition's leader only: "
    "421 42101 elsewhere, 503 50302 when none leads it); offsets assigned by the broker",
)
async def append_batches(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    request: Request,
    broker: BrokerDep,
    acks: Annotated[str | None, Query(description="0, 1, all or -1 (default 1)")] = None,
    acks_header: Annotated[str | None, Header(alias="Acks")] = None,
) -> Response:
    require_content_type(request, BATCH_TYPES)
    level = Acks.parse(
        acks if acks is not None else acks_header if acks_header is not None else "1"
    )
    media = accept_json(request) if level != Acks.NONE else BATCHES
    body = await read_body(request, broker.settings.max_request_bytes)
    results = await broker.appends.append_batches(topic, partition, body, acks=level)
    if level == Acks.NONE:
        return Response(status_code=204)
    batches = [
        {
            "base_offset": r.base_offset,
            "last_offset": r.last_offset,
            "log_append_time": r.log_append_time,
            "duplicate": r.duplicate,
        }
        for r in results
    ]
    return JSONBody({"batches": batches}, media_type=media)


@router.post(
    "/producers",
    response_model=models.ProducerIdentity,
    dependencies=[JSONBodyDep, JSONAnswerDep],
    responses=models.error_responses(
        *_REQUEST,
        MalformedRequestError,
        InvalidRequestError,
        UnknownProducerIdError,
        InvalidProducerEpochError,
        MetadataUnavailableError,  # ids are handed out in cluster-wide blocks from the store
    ),
    tags=["producers"],
    summary="Get an idempotent producer id (epoch 0), or bump an id's epoch to fence old ones",
)
async def init_producer(body: models.InitProducer, broker: BrokerDep) -> models.ProducerIdentity:
    producer_id, epoch = await broker.appends.init_producer(body.producer_id, body.producer_epoch)
    return models.ProducerIdentity(producer_id=producer_id, producer_epoch=epoch)
