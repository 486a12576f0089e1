"""Topic admin routes: create, list, describe, delete, alter configs, grow partitions, reassign
partitions, offsets.

Admin is carried out by the controller: at any other broker these routes relay the request to
it. Offsets are the leader's: elsewhere the request is relayed to the leader.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response

from headwater.errors import (
    HeadwaterError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
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
from headwater_broker.api.forward import at_controller, at_leader, mark_metadata_offset
from headwater_broker.cluster.state import PartitionState
from headwater_kernel.body import JSONBody

router = APIRouter(default_response_class=JSONBody, tags=["topics"], dependencies=[JSONAnswerDep])

# Every route answers JSON (406 if Accept allows none); a JSON body can be unreadable (400), too
# large (413), of another type (415) or of the wrong shape (422 42200); a path partition that is
# no integer is 422 42200. Admin writes are carried out by the controller (503 50305/50306).
_ANSWER = (NotAcceptableError,)
_BODY = (
    MalformedRequestError,
    RequestTooLargeError,
    UnsupportedMediaTypeError,
    InvalidRequestError,
)
# What every admin write with a JSON body can answer, before its own errors.
_ADMIN_WRITE: tuple[type[HeadwaterError], ...] = (*_ANSWER, *_BODY, *models.AT_CONTROLLER)
_PARTITION = (TopicNotFoundError, PartitionNotFoundError, InvalidRequestError)


@router.post(
    "/topics",
    status_code=201,
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ADMIN_WRITE,
        TopicAlreadyExistsError,
        InvalidTopicError,
        InvalidConfigError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidReplicaAssignmentError,
        StorageError,
    ),
    summary="Create a topic (40901 exists, 42201 name, 42202 config, 42203/42204 counts, "
    "42206 assignment)",
)
async def create_topic(
    body: models.CreateTopic, request: Request, response: Response, broker: BrokerDep
) -> models.TopicDescription | Response:
    if (relayed := await at_controller(request, broker)) is not None:
        return relayed
    description = await broker.admin.create_topic(
        body.name, body.partitions, body.replication_factor, body.configs, body.replica_assignment
    )
    mark_metadata_offset(response, broker)
    return models.TopicDescription.model_validate(description)


@router.get(
    "/topics",
    response_model=list[str],
    responses=models.error_responses(*_ANSWER),
    summary="Topic names, sorted",
)
async def list_topics(broker: BrokerDep) -> list[str]:
    return broker.admin.list_topics()


@router.get(
    "/topics/{topic}",
    response_model=models.TopicDescription,
    responses=models.error_responses(*_ANSWER, TopicNotFoundError),
    summary="Partitions with their leaders, replicas and offsets, and the effective configs",
)
async def describe_topic(topic: models.TopicName, broker: BrokerDep) -> models.TopicDescription:
    return models.TopicDescription.model_validate(await broker.admin.describe_topic(topic))


@router.delete(
    "/topics/{topic}",
    status_code=204,
    response_class=Response,
    responses=models.error_responses(
        *_ANSWER, *models.AT_CONTROLLER, TopicNotFoundError, StorageError
    ),
    summary="Delete a topic",
)
async def delete_topic(topic: models.TopicName, request: Request, broker: BrokerDep) -> Response:
    if (relayed := await at_controller(request, broker)) is not None:
        return relayed
    await broker.admin.delete_topic(topic)
    response = Response(status_code=204)
    mark_metadata_offset(response, broker)
    return response


@router.patch(
    "/topics/{topic}/configs",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ADMIN_WRITE, TopicNotFoundError, InvalidConfigError, StorageError
    ),
    summary="Set and delete config overrides at once (42202 unknown key or bad value)",
)
async def alter_configs(
    topic: models.TopicName,
    body: models.AlterConfigs,
    request: Request,
    response: Response,
    broker: BrokerDep,
) -> models.TopicDescription | Response:
    if (relayed := await at_controller(request, broker)) is not None:
        return relayed
    description = await broker.admin.alter_topic_configs(topic, body.set, body.delete)
    mark_metadata_offset(response, broker)
    return models.TopicDescription.model_validate(description)


@router.post(
    "/topics/{topic}/partitions",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        *_ADMIN_WRITE, TopicNotFoundError, InvalidPartitionsError, StorageError
    ),
    summary="Grow the topic to `count` partitions in total (42203 unless larger)",
)
async def add_partitions(
    topic: models.TopicName,
    body: models.PartitionCount,
    request: Request,
    response: Response,
    broker: BrokerDep,
) -> models.TopicDescription | Response:
    if (relayed := await at_controller(request, broker)) is not None:
        return relayed
    description = await broker.admin.add_partitions(topic, body.count)
    mark_metadata_offset(response, broker)
    return models.TopicDescription.model_validate(description)


@router.get(
    "/topics/{topic}/partitions",
    response_model=list[models.PartitionSummary],
    responses=models.error_responses(*_ANSWER, TopicNotFoundError),
    summary="The topic's partitions: leader, leader epoch, replicas, in-sync replicas",
)
async def list_partitions(
    topic: models.TopicName, broker: BrokerDep
) -> list[models.PartitionSummary]:
    return [models.PartitionSummary.model_validate(p) for p in broker.admin.list_partitions(topic)]


@router.get(
    "/topics/{topic}/partitions/{partition}",
    response_model=models.PartitionDescription,
    responses=models.error_responses(*_ANSWER, *_PARTITION),
    summary="One partition with its leader and its beginning and end offsets",
)
async def describe_partition(
    topic: models.TopicName, partition: models.PartitionNumber, broker: BrokerDep
) -> models.PartitionDescription:
    info = await broker.admin.partition_info(topic, partition)
    return models.PartitionDescription.model_validate(info)


def _reassignment(state: PartitionState) -> models.Reassignment:
    return models.Reassignment(
        topic=state.topic,
        partition=state.partition,
        in_progress=state.reassigning,
        replicas=list(state.replicas),
        target_replicas=list(state.target_replicas),
        adding=list(state.adding),
        removing=list(state.removing),
        isr=list(state.isr),
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
    )


@router.post(
    "/topics/{topic}/partitions/{partition}/reassignment",
    response_model=models.Reassignment,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(*_ADMIN_WRITE, *_PARTITION, InvalidReplicaAssignmentError),
    summary="Move the partition to a new replica list (42206 unknown or repeated brokers); "
    "the replicas of before cancel a move in progress",
)
async def reassign_partition(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    body: models.Reassign,
    request: Request,
    response: Response,
    broker: BrokerDep,
) -> models.Reassignment | Response:
    if (relayed := await at_controller(request, broker)) is not None:
        return relayed
    state = await broker.admin.reassign_partition(topic, partition, body.replicas)
    mark_metadata_offset(response, broker)
    return _reassignment(state)


@router.get(
    "/topics/{topic}/partitions/{partition}/reassignment",
    response_model=models.Reassignment,
    responses=models.error_responses(*_ANSWER, *_PARTITION),
    summary="The partition's replica list and the reassignment in progress (adding, removing)",
)
async def describe_reassignment(
    topic: models.TopicName, partition: models.PartitionNumber, broker: BrokerDep
) -> models.Reassignment:
    return _reassignment(broker.admin.reassignment(topic, partition))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    response_model=models.Offsets,
    responses=models.error_responses(*_ANSWER, *_PARTITION, *models.AT_LEADER, *models.KNOWN_END),
    summary="Beginning (log start) and end (next to be written) offsets, from the leader",
)
async def offsets(
    topic: models.TopicName, partition: models.PartitionNumber, request: Request, broker: BrokerDep
) -> models.Offsets | Response:
    if (relayed := await at_leader(request, broker, topic, partition)) is not None:
        return relayed
    beginning, end = await broker.reads.offsets(topic, partition)
    return models.Offsets(beginning_offset=beginning, end_offset=end)


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets/lookup",
    response_model=models.OffsetLookup,
    responses=models.error_responses(*_ANSWER, *_PARTITION, *models.AT_LEADER, *models.KNOWN_END),
    summary="Earliest offset whose timestamp is >= `timestamp` (ms); nulls when none",
)
async def lookup_offset(
    topic: models.TopicName,
    partition: models.PartitionNumber,
    request: Request,
    broker: BrokerDep,
    timestamp: int = Query(description="Milliseconds since the epoch"),
) -> models.OffsetLookup | Response:
    if (relayed := await at_leader(request, broker, topic, partition)) is not None:
        return relayed
    found = await broker.reads.lookup_offset(topic, partition, timestamp)
    if found is None:
        return models.OffsetLookup(offset=None, timestamp=None)
    return models.OffsetLookup(offset=found[0], timestamp=found[1])
