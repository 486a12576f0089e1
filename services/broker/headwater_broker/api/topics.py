"""Topic admin routes: create, list, describe, delete, alter configs, grow partitions, offsets."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from headwater.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    MalformedRequestError,
    NotAcceptableError,
    PartitionNotFoundError,
    RequestTooLargeError,
    StorageError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
    UnsupportedMediaTypeError,
)
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONAnswerDep, JSONBodyDep
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["topics"], dependencies=[JSONAnswerDep])

# Every route answers JSON (406 if Accept allows none); a JSON body can be unreadable (400), too
# large (413), of another type (415) or of the wrong shape (422 42200); a path partition that is
# no integer is 422 42200.
_ANSWER = (NotAcceptableError,)
_BODY = (
    MalformedRequestError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
    InvalidRequestError,
)
_PARTITION = (TopicNotFoundError, PartitionNotFoundError, InvalidRequestError)


@router.post(
    "/topics",
    status_code=201,
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ANSWER,
        *_BODY,
        TopicAlreadyExistsError,
        InvalidTopicError,
        InvalidConfigError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        StorageError,
    ),
    summary="Create a topic (40901 exists, 42201 name, 42202 config, 42203/42204 counts)",
)
async def create_topic(body: models.CreateTopic, broker: BrokerDep) -> models.TopicDescription:
    description = broker.create_topic(
        body.name, body.partitions, body.replication_factor, body.configs
    )
    return models.TopicDescription.model_validate(description)


@router.get(
    "/topics",
    response_model=list[str],
    responses=models.error_responses(*_ANSWER),
    summary="Topic names, sorted",
)
async def list_topics(broker: BrokerDep) -> list[str]:
    return broker.list_topics()


@router.get(
    "/topics/{topic}",
    response_model=models.TopicDescription,
    responses=models.error_responses(*_ANSWER, TopicNotFoundError),
    summary="Partitions with their offsets, and the effective configs",
)
async def describe_topic(topic: models.TopicName, broker: BrokerDep) -> models.TopicDescription:
    return models.TopicDescription.model_validate(broker.describe_topic(topic))


@router.delete(
    "/topics/{topic}",
    status_code=204,
    response_class=Response,
    responses=models.error_responses(*_ANSWER, TopicNotFoundError, StorageError),
    summary="Delete a topic",
)
async def delete_topic(topic: models.TopicName, broker: BrokerDep) -> Response:
    await broker.delete_topic(topic)
    return Response(status_code=204)


@router.patch(
    "/topics/{topic}/configs",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ANSWER, *_BODY, TopicNotFoundError, InvalidConfigError, StorageError
    ),
    summary="Set and delete config overrides at once (42202 unknown key or bad value)",
)
async def alter_configs(
    topic: models.TopicName, body: models.AlterConfigs, broker: BrokerDep
) -> models.TopicDescription:
    description = broker.alter_topic_configs(topic, body.set, body.delete)
    return models.TopicDescription.model_validate(description)


@router.post(
    "/topics/{topic}/partitions",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ANSWER, *_BODY, TopicNotFoundError, InvalidPartitionsError, StorageError
    ),
    summary="Grow the topic to `count` partitions in total (42203 unless larger)",
)
async def add_partitions(
    topic: models.TopicName, body: models.PartitionCount, broker: BrokerDep
) -> models.TopicDescription:
    return models.TopicDescription.model_validate(broker.add_partitions(topic, body.count))


@router.get(
    "/topics/{topic}/partitions",
    response_model=list[models.PartitionSummary],
    responses=models.error_responses(*_ANSWER, TopicNotFoundError),
    summary="The topic's partitions and their replicas",
)
async def list_partitions(
    topic: models.TopicName, broker: BrokerDep
) -> list[models.PartitionSummary]:
    return [models.PartitionSummary.model_validate(p) for p in broker.list_partitions(topic)]


@router.get(
    "/topics/{topic}/partitions/{partition}",
    response_model=models.PartitionDescription,
    responses=models.error_responses(*_ANSWER, *_PARTITION),
    summary="One partition with its beginning and end offsets",
)
async def describe_partition(
    topic: models.TopicName, partition: models.PartitionNumber, broker: BrokerDep
) -> models.PartitionDescription:
    return models.PartitionDescription.model_validate(broker.partition_info(topic, partition))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    response_model=models.Offsets,
    responses=models.error_responses(*_ANSWER, *_PARTITION),
    summary="Beginning (log start) and end (next to be written) offsets",
)
async def offsets(
    topic: models.TopicName, partition: models.PartitionNumber, broker: BrokerDep
) -> models.Offsets:
    beginning, end = broker.offsets(topic, partition)
    return models.Offsets(beginning_offset=beginning, end_offset=end)


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets/lookup",
    response_model=models.OffsetLookup,
    responses=models.error_responses(*_ANSWER, *_PARTITION),
    summary="Earliest offset whose timestamp is >= `timestamp` (ms); nulls when none",
)
async def lookup_offset(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    broker: BrokerDep,
    timestamp: int = Query(description="Milliseconds since the epoch"),
) -> models.OffsetLookup:
    found = broker.lookup_offset(topic, partition, timestamp)
    if found is None:
        return models.OffsetLookup(offset=None, timestamp=None)
    return models.OffsetLookup(offset=found[0], timestamp=found[1])
