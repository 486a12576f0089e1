"""What this broker asks of the controller: its leaders' in-sync set changes, a controlled shutdown.

Both go to the controller in-process when this broker holds the role, else over HTTP to the
controller the image names (``POST /cluster/controller/isr``, ``SHUTDOWN_PATH``), with a timeout
of one lease: a controller that does not answer within it is likely gone, and the request is
made again to its successor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from headwater.errors import BROKER, HeadwaterError, NotControllerError, StaleBrokerEpochError
from headwater.types import BrokerId
from headwater_broker.cluster.election import IsrProposal
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import PartitionState
from headwater_broker.partitions import PartitionRegistry
from headwater_broker.settings import BrokerSettings

log = logging.getLogger("headwater.broker")

ISR_PATH = "/cluster/controller/isr"
SHUTDOWN_PATH = "/cluster/controller/shutdown"


class ControllerRequests:
    """The requests of one broker to its controller (``close()`` ends its HTTP client)."""

    def __init__(
        self,
        settings: BrokerSettings,
        registry: PartitionRegistry,
        node: Callable[[], ClusterNode | None],
        ssl_context: ssl.SSLContext,
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.registry = registry
        self._node = node
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_keepalive_connections=8), verify=ssl_context
        )

    async def close(self) -> None:
        await self.client.aclose()

    def _joined(self) -> ClusterNode:
        node = self._node()
        if node is None:
            raise NotControllerError("This broker has not joined its cluster yet")
        return node

    async def send_isr(self, proposal: IsrProposal) -> PartitionState:
        """Send a leader's in-sync proposal to the controller (itself, or over HTTP)."""
        node = self._joined()
        if node.is_controller:
            return await node.controller_for_admin().alter_isr(proposal)
        url = node.image.controller_url()
        if url is None:
            raise NotControllerError("No controller now: the in-sync proposal waits")
        answer = await self.client.post(
            url.rstrip("/") + ISR_PATH,
            json=isr_proposal_body(proposal),
            # A controller that does not answer within its lease is likely gone: propose again
            # (to its successor) rather than hold the in-sync set where it is.
            timeout=self.settings.controller_lease_ms / 1000,
        )
        if answer.status_code != 200:
            raise BROKER.from_body(answer.status_code, _json_or_text(answer.content))
        return PartitionState.from_body(answer.json())

    async def controlled_shutdown(self, settle: Callable[[float], Any]) -> None:
        """Move every leadership off this broker before it stops (docs/cluster.md, "Controlled
        shutdown"): ask the controller to record it ``shutting_down`` -- it leaves the ISRs and
        its partitions get leaders among the other in-sync replicas -- then wait until this
        broker leads nothing. Bounded by ``controlled_shutdown_timeout_ms``; the broker stops
        either way. Requests that reach it meanwhile are answered 421 naming the new leader.
        ``settle(timeout_s)`` waits until the replicas reflect the newest metadata.
        """
        node = self._node()
        if node is None or node.replaced.is_set():
            return
        me = self.broker_id
        timeout_s = self.settings.controlled_shutdown_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        started = time.monotonic()
        recorded = False
        while time.monotonic() < deadline:
            try:
                await self._request_shutdown(node)
                recorded = True
                break
            except StaleBrokerEpochError as exc:
                log.warning("broker %d cannot shut down in a controlled way: %s", me, exc)
                return  # another incarnation of this id is registered: nothing here to move
            except (HeadwaterError, httpx.HTTPError) as exc:
                log.info("controlled shutdown of broker %d not recorded yet: %s", me, exc)
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)
        while recorded and time.monotonic() < deadline:
            if not node.image.led_by(me) and not self.registry.leaders():
                log.info(
                    "broker %d leads nothing after %.0f ms of controlled shutdown",
                    me,
                    (time.monotonic() - started) * 1000,
                )
                return
            await settle(max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(self.settings.metadata_poll_ms / 1000)
        log.warning(
            "broker %d stops after %d ms of controlled shutdown still leading %d partition(s)",
            me,
            self.settings.controlled_shutdown_timeout_ms,
            len(node.image.led_by(me)),
        )

    async def _request_shutdown(self, node: ClusterNode) -> None:
        """Ask the controller (this broker, or over HTTP) to move this broker's leaderships."""
        if node.is_controller:
            await node.controller_for_admin().controlled_shutdown(self.broker_id, node.broker_epoch)
            return
        url = node.image.controller_url()
        if url is None or node.image.controller.broker_id == self.broker_id:
            raise NotControllerError("No controller now: the controlled shutdown waits")
        answer = await self.client.post(
            url.rstrip("/") + SHUTDOWN_PATH,
            json={"broker_id": self.broker_id, "broker_epoch": node.broker_epoch},
            timeout=self.settings.controller_lease_ms / 1000,
        )
        if answer.status_code != 200:
            raise BROKER.from_body(answer.status_code, _json_or_text(answer.content))
        # The controller answered once it wrote the change; this broker reads it next poll.
        offset = int(answer.json().get("offset", 0))
        with contextlib.suppress(TimeoutError):
            await node.follower.wait_for(offset, self.settings.controller_lease_ms / 1000)


def isr_proposal_body(proposal: IsrProposal) -> dict[str, Any]:
    """The JSON of ``POST /cluster/controller/isr``."""
    return {
        "topic": proposal.topic,
        "partition": proposal.partition,
        "leader_id": proposal.leader_id,
        "leader_epoch": proposal.leader_epoch,
        "partition_epoch": proposal.partition_epoch,
        "isr": [{"broker_id": m.broker_id, "broker_epoch": m.broker_epoch} for m in proposal.isr],
    }


def _json_or_text(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content.decode(errors="replace")
