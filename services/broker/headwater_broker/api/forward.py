"""Requests a broker cannot answer itself, sent on: to a partition's leader or the controller.

A route asks :func:`at_leader` or :func:`at_controller` first; ``None`` means "answer here",
a response is the relayed answer of the broker that can. A request that was itself relayed here
is never relayed again (``FORWARDED_BY``): it gets this broker's own 421 or 503.
"""

from __future__ import annotations

import contextlib
from urllib.parse import quote

from fastapi import Request, Response

from headwater.errors import NotControllerError
from headwater_broker.broker import Broker
from headwater_broker.peers import FORWARDED_BY, METADATA_OFFSET


def forwarded(request: Request) -> bool:
    return FORWARDED_BY in request.headers


async def at_leader(
    request: Request, broker: Broker, topic: str, partition: int
) -> Response | None:
    """None if this broker leads the partition, else the leader's answer to the request."""
    url = await broker.routing.find_leader(topic, partition)
    if url is None:
        return None
    if forwarded(request):
        raise broker.routing.not_leader(topic, partition)
    return await _relay(request, broker, url, controller=False)


async def at_controller(request: Request, broker: Broker) -> Response | None:
    """None if this broker is the active controller, else the controller's answer."""
    url = await broker.admin.controller_url()
    if url is None:
        return None
    if forwarded(request):
        raise NotControllerError(
            f"Broker {broker.broker_id} is not the controller either; retry",
            controller_url=url,
        )
    answer = await _relay(request, broker, url, controller=True)
    # Read-your-writes at this broker: its metadata catches up with the controller's change.
    offset = answer.headers.get(METADATA_OFFSET)
    if offset is not None and offset.isdigit():
        with contextlib.suppress(TimeoutError):
            await broker.node.follower.wait_for(int(offset), 2.0)
        await broker.replicas_settled()
    return answer


def mark_metadata_offset(response: Response, broker: Broker) -> None:
    """Name the change an admin answer reflects, for the broker that relayed the request."""
    response.headers[METADATA_OFFSET] = str(broker.image.offset)


async def _relay(request: Request, broker: Broker, url: str, *, controller: bool) -> Response:
    path = request.scope.get("raw_path") or quote(request.url.path).encode()
    target = path.decode("latin-1")
    query = request.scope.get("query_string", b"")
    if query:
        target += "?" + query.decode("latin-1")
    wait_ms = request.query_params.get("max_wait_ms", "")
    answer = await broker.peers.relay(
        url,
        request.method,
        target,
        request.headers,
        await request.body(),
        broker.image.offset,
        controller=controller,
        extra_wait_s=int(wait_ms) / 1000 if wait_ms.isdigit() else 0.0,
    )
    return Response(answer.content, status_code=answer.status, headers=answer.headers)
