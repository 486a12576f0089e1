"""Routes between brokers: follower fetches, and in-sync proposals sent to the controller.

``POST /replication/fetch`` (docs/cluster.md, "Replication"): the body and answer formats are in
``headwater_broker.replication.wire``; it is served by :class:`ReplicaFetchPath`, ahead of the
routers (the app installs it). ``POST /cluster/controller/isr``: a leader's in-sync
proposal, committed by the controller with compare-and-set on the partition epoch; the answer is
the partition's new state (503 50305 at a broker that is not the controller). ``POST
/cluster/controller/shutdown`` ``{"broker_id", "broker_epoch"}``: a broker's controlled shutdown,
recorded by the controller (409 for a stale broker epoch); the answer lists the partitions it
still leads and the metadata offset of the change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.errors import (
    HeadwaterError,
    MalformedRequestError,
    NotLeaderOrFollowerError,
    PartitionNotFoundError,
    RequestTooLargeError,
    ServiceUnavailableError,
    StaleBrokerEpochError,
    StalePartitionEpochError,
    TopicNotFoundError,
)
from headwater.types import BrokerId
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONBodyDep
from headwater_broker.broker import Broker
from headwater_broker.cluster.election import IsrMember, IsrProposal
from headwater_broker.cluster.state import BrokerEpoch, LeaderEpoch, PartitionEpoch
from headwater_broker.controller_requests import SHUTDOWN_PATH
from headwater_broker.replication.fetcher import FETCH_PATH
from headwater_broker.replication.leader import answer_fetch
from headwater_broker.replication.wire import MEDIA_TYPE
from headwater_kernel.body import JSONBody
from headwater_kernel.errors import error_response

# Broker-to-broker only: left out of the public OpenAPI document (clients never call these).
router = APIRouter(tags=["replication"], include_in_schema=False)


class ReplicaFetchPath:
    """ASGI middleware serving ``POST /replication/fetch`` ahead of the REST routes.

    A follower's fetch is the most frequent request between brokers and sits on the acks=all
    path twice per replicated batch (the answer carrying the batch, then the next fetch
    reporting the follower's log end, which moves the high watermark). Through FastAPI's
    routing, dependencies and the REST middlewares (Accept negotiation, body limit, exception
    middleware) serving one cost about 270 us of CPU; here about 120 us. It stays inside the
    kernel's request telemetry and Starlette's server-error middleware, so fetches keep their
    request id, their per-route metrics and the 500 of an unexpected error; typed errors are
    answered with the kernel's ``error_response``, as the app's handler answers them.
    """

    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != FETCH_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        scope["route"] = _FETCH_ROUTE  # the template telemetry counts requests under
        broker = self.broker
        try:
            body = await _read_body(receive, broker.settings.max_request_bytes)
            if body is None:
                return  # the follower went away (its fetcher cancelled the request)
            if broker.replication is None:
                raise ServiceUnavailableError("This broker has not joined its cluster yet; retry")
            chunks = await answer_fetch(
                body, broker.registry.leader, broker.routing.replica_fetch_hint, broker.now_ms
            )
        except HeadwaterError as exc:
            response = error_response(exc)
            if exc.http_status == 503:
                response.headers["Retry-After"] = str(models.RETRY_AFTER_S)
            await response(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", _MEDIA_TYPE),
                    (b"content-length", b"%d" % sum(len(chunk) for chunk in chunks)),
                ],
            }
        )
        # Chunk by chunk: each partition's batches go to the socket as read, not copied into
        # one buffer first.
        last = len(chunks) - 1
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < last})


@dataclass(frozen=True)
class _RouteLabel:
    path_format: str


_FETCH_ROUTE = _RouteLabel(FETCH_PATH)
_MEDIA_TYPE = MEDIA_TYPE.encode("latin-1")


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body (413 41301 past ``limit``); None if the client disconnected."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLargeError(f"Request body exceeds the {limit}-byte limit")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _int(body: dict[str, Any], key: str, what: str = "ISR proposal") -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedRequestError(f"{what}: '{key}' must be an integer")
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


@router.post(
    SHUTDOWN_PATH,
    dependencies=[JSONBodyDep],
    responses=models.error_responses(
        MalformedRequestError, StaleBrokerEpochError, *models.AT_CONTROLLER
    ),
    summary="A broker's controlled shutdown (between brokers): the controller records it "
    "shutting_down and moves its leaderships to other in-sync replicas",
)
async def controlled_shutdown(request: Request, broker: BrokerDep) -> JSONBody:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise MalformedRequestError(f"Controlled shutdown is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise MalformedRequestError("Controlled shutdown must be a JSON object")
    controller = broker.node.controller_for_admin()
    still = await controller.controlled_shutdown(
        _int(body, "broker_id", "Controlled shutdown"),
        _int(body, "broker_epoch", "Controlled shutdown"),
    )
    return JSONBody(
        {
            "still_leading": [{"topic": tp.topic, "partition": tp.partition} for tp in still],
            "offset": controller.follower.image.offset,
        }
    )
