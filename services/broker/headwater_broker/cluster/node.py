"""One broker's membership in the cluster: store, session, metadata follower, controller.

:class:`ClusterNode` is the seam the broker wires in: ``start()`` opens the store, registers the
broker (waiting out a dead predecessor's session), loads the image, and starts three tasks --
heartbeats, the metadata follower and the controller loop; ``stop()`` resigns the lease,
releases the session and closes the store. Routes read :attr:`ClusterNode.image`; admin routes
call :meth:`ClusterNode.controller_for_admin` and forward to the controller's URL on
``NotControllerError``. When heartbeats learn that another process took this broker id over,
:attr:`ClusterNode.replaced` is set and the node stops acting: the broker must stop serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TypeVar

from headwater.errors import MetadataUnavailableError, NotControllerError, StaleBrokerEpochError
from headwater.types import BrokerId
from headwater_broker.cluster import session
from headwater_broker.cluster.controller import Controller, ControllerEvent
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.metadata_follower import MetadataFollower
from headwater_broker.cluster.producer_ids import ProducerIds
from headwater_broker.cluster.session import Registration
from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.cluster.state import BrokerEpoch
from headwater_broker.cluster.store import MetadataStore
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker.cluster")

STOP_TIMEOUT_S = 10.0
"""How long stopping waits for the node's tasks, and then for the lease to be resigned."""

T = TypeVar("T")


class ClusterNode:
    """This broker in the cluster (create, then ``await start()``; ``await stop()`` at the end)."""

    def __init__(
        self,
        settings: ClusterSettings,
        broker_id: int,
        url: str,
        *,
        on_controller_event: ControllerEvent | None = None,
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(broker_id)
        self.url = url
        self.on_controller_event = on_controller_event
        self.replaced = asyncio.Event()
        self.storage_offline = False
        self._store: MetadataStore | None = None
        self._registration: Registration | None = None
        self._follower: MetadataFollower | None = None
        self._controller: Controller | None = None
        self._producer_ids: ProducerIds | None = None
        self._tasks = BackgroundTasks(log)
        self.unreachable_peers: Callable[[], list[int]] = list
        """The leaders this broker cannot fetch from (reported with heartbeats)."""

    # --- parts (available once started) ---------------------------------------------------------

    @property
    def store(self) -> MetadataStore:
        return _started(self._store)

    @property
    def registration(self) -> Registration:
        return _started(self._registration)

    @property
    def follower(self) -> MetadataFollower:
        return _started(self._follower)

    @property
    def controller(self) -> Controller:
        return _started(self._controller)

    @property
    def producer_ids(self) -> ProducerIds:
        return _started(self._producer_ids)

    @property
    def image(self) -> MetadataImage:
        return self.follower.image

    @property
    def broker_epoch(self) -> BrokerEpoch:
        return self.registration.epoch

    @property
    def is_controller(self) -> bool:
        return self._controller is not None and self._controller.active

    def controller_for_admin(self) -> Controller:
        """This broker's controller if it is the active one, else ``NotControllerError`` naming
        the controller the request should be forwarded to."""
        controller = self.controller
        if controller.active:
            return controller
        image = self.image
        current = image.controller.broker_id
        url = image.controller_url()
        if current == self.broker_id or current < 0:
            raise NotControllerError("No controller is elected now; retry", controller_id=-1)
        raise NotControllerError(
            f"Broker {self.broker_id} is not the controller; broker {current} is",
            controller_id=current,
            controller_url=url,
        )

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self, register_wait_ms: int | None = None) -> None:
        """Register, load the image, start the background tasks.

        ``register_wait_ms`` (default: one session timeout plus two heartbeats) is how long a
        refusal because the id looks live is retried: enough for a dead predecessor's session to
        expire, too short for a live one's.
        """
        s = self.settings
        store = await asyncio.to_thread(
            MetadataStore,
            s.metadata_url,
            busy_timeout_ms=s.sqlite_busy_timeout_ms,
            stall_timeout_ms=s.controller_lease_ms,
            application_name=f"headwater-broker-{self.broker_id}",
        )
        self._store = store
        try:
            wait = (
                s.session_timeout_ms + 2 * s.heartbeat_interval_ms
                if register_wait_ms is None
                else register_wait_ms
            )
            self._registration = await session.register_waiting(
                store, self.broker_id, self.url, s.rack, s.session_timeout_ms, wait
            )
            self._follower = MetadataFollower(store, s.metadata_poll_ms)
            await self._follower.load()
            self._controller = Controller(
                store, self._follower, s, self.broker_id, on_event=self.on_controller_event
            )
            self._producer_ids = ProducerIds(store, s.producer_id_block_size)
        except BaseException:
            store.close()
            self._store = None
            raise
        log.info(
            "broker %d registered in cluster %s at epoch %d",
            self.broker_id,
            store.cluster_id,
            self._registration.epoch,
        )
        self._tasks.spawn(self._heartbeats(), "cluster-heartbeats")
        self._tasks.spawn(self._follower.run(), "cluster-metadata-follower")
        self._tasks.spawn(self._controller.run(), "cluster-controller")

    @property
    def failed_tasks(self) -> dict[str, str]:
        """Background tasks that died (name -> error): the broker is not ready while any has."""
        return self._tasks.failed

    def metadata_lag_ms(self) -> float:
        """How long this broker's image has lacked a change already in the log (0: current)."""
        return self.follower.lag_ms() if self._follower is not None else 0.0

    async def stop(self) -> None:
        """Resign the lease, release the session (so the id can come back at once), close.

        Bounded: a task that will not stop, or a resignation stuck behind a write, is logged and
        left behind after :data:`STOP_TIMEOUT_S` rather than holding the process's shutdown."""
        if not await self._tasks.stop(timeout_s=STOP_TIMEOUT_S):
            log.warning("cluster tasks still running %.0f s after being cancelled", STOP_TIMEOUT_S)
        store = self._store
        if store is None:
            return
        if self._controller is not None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self._controller.resign()
            except TimeoutError:
                log.warning("the controller lease was not resigned within %.0f s", STOP_TIMEOUT_S)
        if self._registration is not None and not self.replaced.is_set():
            with contextlib.suppress(MetadataUnavailableError):
                await store.call(session.release, store, self._registration)
        store.close()
        self._store = None

    async def abandon(self) -> None:
        """Stop every task and close the store *without* resigning or releasing: what a crash
        (kill -9) leaves behind, for fault drills in one process."""
        await self._tasks.stop()
        if self._store is not None:
            self._store.close()
            self._store = None

    def take_storage_offline(self, reason: str) -> None:
        """Give up every leadership after the data directory failed a write (full or broken).

        As Kafka with its only log directory offline: this broker stops heartbeating and stops
        acting as controller, so the controller fences it once its session times out and elects
        new leaders from the in-sync replicas. The metadata follower goes on, so this broker
        learns it no longer leads and sends producers on (421). The process keeps serving reads;
        restart it once the disk is fixed to rejoin (docs/cluster.md, "Full or failed disk").
        """
        if self.storage_offline:
            return
        self.storage_offline = True
        log.error(
            "broker %d takes its data directory offline after a storage error (%s): it stops "
            "heartbeating, so the controller moves its leaderships; restart it once the disk "
            "is fixed",
            self.broker_id,
            reason,
        )
        if self._controller is not None:
            self._controller.lease.drop()
        for task in self._tasks:
            if task.get_name() in ("cluster-heartbeats", "cluster-controller"):
                task.cancel()

    async def _heartbeats(self) -> None:
        registration = self.registration
        failing = False
        reported: frozenset[int] | None = None
        # Also ended by the flag: a cancel can be lost (headwater_kernel.tasks).
        while not self.storage_offline:
            try:
                unreachable = frozenset(self.unreachable_peers())
                changed = None if unreachable == reported else sorted(unreachable)
                log_end = await self.store.call(
                    session.heartbeat,
                    self.store,
                    registration,
                    self.follower.image.offset,
                    changed,
                )
                if changed is not None and unreachable:
                    log.warning("broker %d reports leaders %s unreachable", self.broker_id, changed)
                elif changed is not None and reported:
                    log.info("broker %d reaches every leader it follows again", self.broker_id)
                reported = unreachable
                self.follower.saw_log_end(log_end)
                failing = False
            except StaleBrokerEpochError as exc:
                log.error("%s; this broker stops acting in the cluster", exc.message)
                self.replaced.set()
                self.controller.lease.drop()
                for task in self._tasks:
                    if task is not asyncio.current_task():
                        task.cancel()
                return
            except MetadataUnavailableError as exc:
                if not failing:
                    log.warning("heartbeat failed: %s", exc)
                failing = True
            except Exception:
                # A bug or an unclassified database error: a broker that stops heartbeating is
                # fenced, so the loop goes on whatever happened.
                if not failing:
                    log.exception("heartbeat failed")
                failing = True
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)


def _started(part: T | None) -> T:
    if part is None:
        raise RuntimeError("the cluster node is not started")
    return part
