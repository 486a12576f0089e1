"""Routes between brokers: follower fetches, and in-sync proposals sent to the controller.

``POST /replication/fetch`` (docs/cluster.md, "Replication"): the body and answer formats are in
``headwater_broker.replication.wire``. ``POST /cluster/controller/isr``: a leader's in-sync
proposal, committed by the controller with compare-and-set on the partition epoch; the answer is
the partition's new state (503 50305 at a broker that is not the controller).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from headwater.errors import (
    MalformedRequestError,
    NotLeaderOrFollowerError,
    PartitionNotFoundError,
    StalePartitionEpochError,
    TopicNotFoundError,
)
from headwater.types import BrokerId
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONBodyDep
from headwater_broker.api.media import read_body
from headwater_broker.cluster.election import IsrMember, IsrProposal
from headwater_broker.cluster.state import BrokerEpoch, LeaderEpoch, PartitionEpoch
from headwater_broker.replication.fetcher import FETCH_PATH, answer_fetch
from headwater_broker.replication.wire import MEDIA_TYPE
from headwater_kernel.body import JSONBody

# Broker-to-broker only: left out of the public OpenAPI document (clients never call these).
router = APIRouter(tags=["replication"], include_in_schema=False)


@router.post(
    FETCH_PATH,
    responses={
        200: {
            "description": "A length-prefixed JSON table of per-partition results, then the "
            "raw batches of each (docs/cluster.md, Replication)",
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        },
        **models.error_responses(MalformedRequestError, *models.AT_CONTROLLER),
    },
    summary="Follower fetch (between brokers): long-polls for the partitions a follower copies "
    "from this leader",
)
async def replica_fetch(request: Request, broker: BrokerDep) -> Response:
    body = await read_body(request, broker.settings.max_request_bytes)
    replication = broker.replication
    if replication is None:
        raise MalformedRequestError("This broker has not joined its cluster yet")
    chunks = await answer_fetch(
        bytes(body), replication.leader_for, broker.replication_hint, broker.now_ms
    )
    return Response(b"".join(chunks), media_type=MEDIA_TYPE)


def _int(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedRequestError(f"ISR proposal: '{key}' must be an integer")
    return value


def parse_isr_proposal(body: Any) -> IsrProposal:
    """The proposal in a request body (400 40002 naming the bad field)."""
    if not isinstance(body, dict):
        raise MalformedRequestError("ISR proposal must be a JSON object")
    topic = body.get("topic")
    if not isinstance(topic, str):
        raise MalformedRequestError("ISR proposal: 'topic' must be a string")
    members = body.get("isr")
    if not isinstance(members, list) or not members:
        raise MalformedRequestError("ISR proposal: 'isr' must be a non-empty list")
    isr = []
    for member in members:
        if not isinstance(member, dict):
            raise MalformedRequestError("ISR proposal: each 'isr' entry must be an object")
        isr.append(
            IsrMember(
                BrokerId(_int(member, "broker_id")), BrokerEpoch(_int(member, "broker_epoch"))
            )
        )
    return IsrProposal(
        topic,
        _int(body, "partition"),
        BrokerId(_int(body, "leader_id")),
        LeaderEpoch(_int(body, "leader_epoch")),
        PartitionEpoch(_int(body, "partition_epoch")),
        tuple(isr),
    )


@router.post(
    "/cluster/controller/isr",
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        MalformedRequestError,
        TopicNotFoundError,
        PartitionNotFoundError,
        StalePartitionEpochError,
        NotLeaderOrFollowerError,
        *models.AT_CONTROLLER,
    ),
    summary="A leader's in-sync set proposal (between brokers), committed by the controller; "
    "answers the partition's new state",
)
async def alter_isr(request: Request, broker: BrokerDep) -> JSONBody:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise MalformedRequestError(f"ISR proposal is not valid JSON: {exc}") from None
    proposal = parse_isr_proposal(body)
    state = await broker.node.controller_for_admin().alter_isr(proposal)
    return JSONBody(state.to_body())
