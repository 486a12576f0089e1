"""Topic admin routes: create, list, describe, delete, alter configs, grow partitions, offsets."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONAnswerDep, JSONBodyDep
from headwater_kernel.body import JSONBody

router = APIRouter(
    default_response_class=JSONBody,
    tags=["topics"],
    dependencies=[JSONAnswerDep],
    responses=models.error_responses(400, 404, 406, 409, 413, 415, 422),
)


@router.post(
    "/topics",
    status_code=201,
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    summary="Create a topic (40901 exists, 42201 name, 42202 config, 42203/42204 counts)",
)
async def create_topic(body: models.CreateTopic, broker: BrokerDep) -> models.TopicDescription:
    description = broker.create_topic(
        body.name, body.partitions, body.replication_factor, body.configs
    )
    return models.TopicDescription.model_validate(description)


@router.get("/topics", response_model=list[str], summary="Topic names, sorted")
async def list_topics(broker: BrokerDep) -> list[str]:
    return broker.list_topics()


@router.get(
    "/topics/{topic}",
    response_model=models.TopicDescription,
    summary="Partitions with their offsets, and the effective configs",
)
async def describe_topic(topic: str, broker: BrokerDep) -> models.TopicDescription:
    return models.TopicDescription.model_validate(broker.describe_topic(topic))


@router.delete(
    "/topics/{topic}", status_code=204, response_class=Response, summary="Delete a topic"
)
async def delete_topic(topic: str, broker: BrokerDep) -> Response:
    await broker.delete_topic(topic)
    return Response(status_code=204)


@router.patch(
    "/topics/{topic}/configs",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    summary="Set and delete config overrides at once (42202 unknown key or bad value)",
)
async def alter_configs(
    topic: str, body: models.AlterConfigs, broker: BrokerDep
) -> models.TopicDescription:
    description = broker.alter_topic_configs(topic, body.set, body.delete)
    return models.TopicDescription.model_validate(description)


@router.post(
    "/topics/{topic}/partitions",
    response_model=models.TopicDescription,
    dependencies=[JSONBodyDep],
    summary="Grow the topic to `count` partitions in total (42203 unless larger)",
)
async def add_partitions(
    topic: str, body: models.PartitionCount, broker: BrokerDep
) -> models.TopicDescription:
    return models.TopicDescription.model_validate(broker.add_partitions(topic, body.count))


@router.get(
    "/topics/{topic}/partitions",
    response_model=list[models.PartitionSummary],
    summary="The topic's partitions and their replicas",
)
async def list_partitions(topic: str, broker: BrokerDep) -> list[models.PartitionSummary]:
    return [models.PartitionSummary.model_validate(p) for p in broker.list_partitions(topic)]


@router.get(
    "/topics/{topic}/partitions/{partition}",
    response_model=models.PartitionDescription,
    summary="One partition with its beginning and end offsets",
)
async def describe_partition(
    topic: str, partition: int, broker: BrokerDep
) -> models.PartitionDescription:
    return models.PartitionDescription.model_validate(broker.partition_info(topic, partition))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    response_model=models.Offsets,
    summary="Beginning (log start) and end (next to be written) offsets",
)
async def offsets(topic: str, partition: int, broker: BrokerDep) -> models.Offsets:
    beginning, end = broker.offsets(topic, partition)
    return models.Offsets(beginning_offset=beginning, end_offset=end)


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets/lookup",
    response_model=models.OffsetLookup,
    summary="Earliest offset whose timestamp is >= `timestamp` (ms); nulls when none",
)
async def lookup_offset(
    topic: str,
    partition: int,
    broker: BrokerDep,
    timestamp: int = Query(description="Milliseconds since the epoch"),
) -> models.OffsetLookup:
    found = broker.lookup_offset(topic, partition, timestamp)
    if found is None:
        return models.OffsetLookup(offset=None, timestamp=None)
    return models.OffsetLookup(offset=found[0], timestamp=found[1])
