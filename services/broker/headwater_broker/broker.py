"""The broker: the composition root that wires its parts, and their lifecycle.

The parts, each a module of its own (docs/architecture.md draws them):

- ``partitions.py`` -- the registry of hosted partitions: each replica's log and role;
- ``replicas.py`` -- applies each metadata image to the registry (replicas hosted, roles);
- ``roles.py`` -- replication's roles: leaders, fetchers, in-sync proposals, checkpoints;
- ``routing.py`` -- serve here, relay to the leader, or refuse (421 / 503);
- ``topic_admin.py`` -- topic admin through the controller; descriptions;
- ``appends.py`` and ``reads.py`` -- the produce and fetch paths;
- ``controller_requests.py`` -- in-sync set changes and controlled shutdown, sent to the
  controller.

Every HTTP route calls one method of one part; nothing here (nor in those parts, ``log/``,
``topic_config.py``, ``producer_registry.py``, ``metrics.py``, ``settings.py``) imports FastAPI
or Starlette. Errors are the broker family's typed errors (``headwater.errors``).

Threading -- the one policy for the whole broker:

* **The event loop does everything but the steady fdatasync of appended bytes**: routes,
  validation, offset assignment, the ``pwritev`` of an append, every ``pread`` of a fetch,
  long-poll waits, retention, topic admin, and the rare syncs that must finish before the
  next step (a segment roll, the atomic rewrite of ``log-start-offset``). SQL on the
  metadata store runs on the store's own threads (``MetadataStore.call``).
* **Worker threads (``asyncio.to_thread``) run only fdatasync of active segments**:
  ``PartitionLog._sync`` for ``BROKER_FSYNC=always`` and the ``interval`` task's pass over
  every partition. A sync may run while the loop appends to the same file: ``Segment.flush``
  clears its dirty flag first, so bytes written meanwhile are synced by the next one.
* **Appends to one partition are serialised** by ``PartitionLog.lock`` (an asyncio lock, held
  from judging producer sequences to the end of the write); retention, deletion and close take
  it too. Reads take no lock: they copy bytes below the high watermark, and segments are only
  deleted on the loop with no await between finding a segment and reading it.
* **fsync=always is a group commit**: an append is written under the lock, then waits outside
  it for one fdatasync per partition at a time; appends that arrive meanwhile are written and
  share the next one. The high watermark -- what fetches see -- moves only past synced bytes,
  and the producer is answered then. With ``interval`` and ``never`` it moves at the write.

The cluster decides what exists: topics, their partitions, replica lists and leaders live in
the shared metadata (``cluster/``, docs/cluster.md); this broker holds the replicas the metadata
gives it and serves, on the fast paths, only the partitions it leads. Topic admin is carried out
by the controller; REST Proxy-shaped produce for partitions led elsewhere is relayed to their
leaders (``peers.py``).

Durable state under ``BROKER_DATA_DIR`` (``catalog.py``)::

    meta.properties      cluster.id and broker.id: a data dir never joins another cluster
    cluster.db           the metadata of a one-broker cluster (when BROKER_METADATA_URL is unset)
    <topic>-<p>/         one directory per replica (layout in log/segment.py), with
                         partition.metadata naming its topic id
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from typing import Any

from headwater.errors import ServiceUnavailableError, StorageError
from headwater.types import BrokerId
from headwater_broker import catalog, idempotency, metrics
from headwater_broker.appends import Appends
from headwater_broker.cluster import producer_ids
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.controller_requests import ControllerRequests
from headwater_broker.log.local_log import is_disk_failure
from headwater_broker.log.partition import PartitionLog
from headwater_broker.partitions import PartitionRegistry, update_offset_metrics
from headwater_broker.peers import Peers
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.reads import Reads
from headwater_broker.replicas import Replicas
from headwater_broker.roles import Replication
from headwater_broker.routing import Routing
from headwater_broker.settings import BrokerSettings
from headwater_broker.topic_admin import TopicAdmin
from headwater_kernel.clock import SYSTEM_CLOCK, Clock
from headwater_kernel.security.tls import client_ssl_context
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker")


class Broker:
    """One broker: its parts (see the module docstring), joined to its cluster.

    ``open()`` prepares the data directory; ``start()`` joins the cluster (registers, loads the
    metadata, imports a pre-cluster catalog, waits to be recorded active) and runs upkeep;
    ``close()`` stops it all. The routes reach the parts: :attr:`admin`, :attr:`appends`,
    :attr:`reads`, :attr:`routing`.
    """

    def __init__(self, settings: BrokerSettings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.data_dir = settings.data_path
        self.clock = clock
        self.producer_ids = ProducerRegistry(settings.producer_id_expiration_ms)
        self.registry = PartitionRegistry(self.data_dir, settings.fsync, self.producer_ids)
        # What this broker's own clients (peers, controller, leaders) verify and present.
        self.client_tls = client_ssl_context(settings)
        self.peers = Peers(settings.forward_timeout_ms, self.broker_id, self.client_tls)
        self.is_open = False
        self._node: ClusterNode | None = None
        self._tasks = BackgroundTasks(log)
        self.replicas: Replicas | None = None
        self.replication: Replication | None = None
        self.routing = Routing(settings, self.registry, lambda: self.node, self.replicas_settled)
        self.admin = TopicAdmin(
            settings, self.routing, self.peers, lambda: self.node, self.replicas_settled
        )
        self.appends = Appends(
            settings,
            self.routing,
            self.admin,
            self.peers,
            self.producer_ids,
            lambda: self.node,
            self.now_ms,
            lambda: self.is_open,
        )
        self.reads = Reads(settings, self.routing)
        self.controller_requests = ControllerRequests(
            settings, self.registry, lambda: self._node, self.client_tls
        )

    def now_ms(self) -> int:
        return self.clock.now_ms()

    @property
    def node(self) -> ClusterNode:
        if self._node is None:
            raise ServiceUnavailableError("The broker has not joined its cluster yet")
        return self._node

    @property
    def image(self) -> MetadataImage:
        return self.node.image

    # --- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Prepare the data directory (leftovers of interrupted deletions are removed)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.data_dir.glob("*.deleted"):
            shutil.rmtree(leftover, ignore_errors=True)
        self.is_open = True

    async def start(self) -> None:
        """Join the cluster, then start retention (and the interval fsync) in the background."""
        node = ClusterNode(
            self.settings.cluster_settings(),
            self.broker_id,
            self.settings.advertised_url,
            on_controller_event=_controller_event,
        )
        await node.start()
        self._node = node
        try:
            catalog.check_cluster_id(self.data_dir, node.store.cluster_id, self.broker_id)
            self.replication = Replication(
                self.registry,
                broker_id=self.broker_id,
                broker_epoch=lambda: node.broker_epoch,
                now_ms=self.now_ms,
                send_isr=self.controller_requests.send_isr,
                is_active=lambda b: node.image.is_active(b),
                # A follower's write failing on the disk takes it offline, as a leader's does.
                on_disk_failure=node.take_storage_offline,
                fetch_timeout_ms=self.settings.replica_fetch_timeout_ms,
                ssl_context=self.client_tls,
            )
            node.unreachable_peers = self.replication.unreachable_leaders
            self.replication.start()
            self.replicas = Replicas(
                self.settings, self.registry, self.replication, node, self.now_ms
            )
            await self.replicas.start()
            await self._wait_active()
            await catalog.import_catalog(self)
            await self.replicas.settle()
            catalog.remove_strays(self)
        except BaseException:
            await self._leave()
            raise
        self._tasks.spawn(self._upkeep_loop(), "broker-upkeep")
        if self.settings.fsync == "interval":
            self._tasks.spawn(self._fsync_loop(), "broker-interval-fsync")

    async def _wait_active(self) -> None:
        """Wait (bounded) until the controller has recorded this incarnation active."""
        node = self.node
        deadline = time.monotonic() + self.settings.startup_timeout_ms / 1000
        while not node.image.is_active(self.broker_id, node.broker_epoch):
            if time.monotonic() > deadline:
                log.warning(
                    "broker %d is not active after %d ms: no controller has recorded it yet",
                    self.broker_id,
                    self.settings.startup_timeout_ms,
                )
                return
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 2000)

    async def close(self) -> None:
        """Stop background work, leave the cluster and close every partition cleanly."""
        await self._tasks.stop()
        self.is_open = False
        await self._leave()
        for plog in self.all_partitions():
            async with plog.lock:
                plog.close()
        await self.peers.close()
        await self.controller_requests.close()

    async def _leave(self) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        if self.replication is not None:
            await self.replication.close()
        if self._node is not None:
            await self._node.stop()

    async def controlled_shutdown(self) -> None:
        """Move every leadership off this broker before it stops (``controller_requests.py``)."""
        await self.controller_requests.controlled_shutdown(self._settle_within)

    async def _settle_within(self, timeout_s: float) -> None:
        if self.replicas is not None:
            await self.replicas.settle(timeout_s)

    async def replicas_settled(self) -> None:
        """Wait until this broker's replicas reflect its current image (its own admin writes)."""
        if self.replicas is not None:
            await self.replicas.settle()

    async def _upkeep_loop(self) -> None:
        interval = self.settings.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.enforce_retention()
                await self.expire_producers()
            except Exception:
                log.exception("retention run failed")

    async def _fsync_loop(self) -> None:
        """``BROKER_FSYNC=interval``: fdatasync every partition each interval. A failure takes
        the storage offline exactly as a failed sync under ``always`` does (one I/O error
        policy): the bytes written since the last sync may not be durable."""
        interval = self.settings.fsync_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(_flush_all, self.all_partitions())
            except StorageError as exc:
                if not is_disk_failure(exc):
                    raise
                self.node.take_storage_offline(exc.message)
                return

    def all_partitions(self) -> list[PartitionLog]:
        return self.registry.logs()

    async def enforce_retention(self) -> int:
        """Apply every topic's retention now; return how many segments were deleted."""
        deleted = 0
        now = self.now_ms()
        for plog in self.all_partitions():
            deleted += await plog.enforce_retention(now)
            update_offset_metrics(plog)
        return deleted

    async def expire_producers(self) -> list[int]:
        """Forget producer ids idle past BROKER_PRODUCER_ID_EXPIRATION_MS (and their state).

        A partition forgets a producer by the last batch it stored of it, as Kafka's
        ``producer.id.expiration.ms`` -- not by whether this broker saw the producer itself: a
        follower copies producers that never wrote to it, and must still know their sequences
        when it becomes the leader their retries reach. The cluster forgets ids no broker used
        for that long, by the store's clock.
        """
        now = self.now_ms()
        gone = self.producer_ids.expire(now)
        live = set(self.producer_ids.producers)
        for plog in self.all_partitions():
            plog.producers.expire(now, self.settings.producer_id_expiration_ms)
            plog.producers.expire(
                now, self.settings.idempotency_key_window_ms, only=idempotency.is_keyed
            )
        store = self.node.store
        await store.call(producer_ids.touch, store, sorted(live))
        await store.call(producer_ids.expire, store, self.settings.producer_id_expiration_ms)
        return gone

    def ready(self) -> tuple[bool, dict[str, Any]]:
        node = self._node
        active = node is not None and node.image.is_active(self.broker_id, node.broker_epoch)
        offline = node is not None and node.storage_offline
        failed = {
            **({} if node is None else node.failed_tasks),
            **self._tasks.failed,
            **({} if self.replicas is None else self.replicas.failed_tasks),
            **({} if self.replication is None else self.replication.failed_tasks),
        }
        lag = 0.0 if node is None else node.metadata_lag_ms()
        current = lag <= self.settings.metadata_max_lag_ms
        return self.is_open and active and not offline and not failed and current, {
            "topics": len(self.registry.topics),
            "data_dir": str(self.data_dir),
            "active": active,
            "storage_offline": offline,
            "metadata_lag_ms": round(lag),
            "failed_tasks": failed,
        }


def _controller_event(event: str, fields: dict[str, Any]) -> None:
    """The controller role was won or lost: the gauge follows at once, not at the next change."""
    metrics.ACTIVE_CONTROLLER.set(1 if event == "elected" else 0)


def _flush_all(logs: list[PartitionLog]) -> None:
    """fdatasync every partition's active segment (runs in a worker thread)."""
    for plog in logs:
        plog.flush()
