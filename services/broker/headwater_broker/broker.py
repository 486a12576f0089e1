"""The broker's domain core: topics and their partition logs, produce, fetch, producers, upkeep.

Everything the HTTP routes do is one method here; nothing here (nor in ``log/``,
``topic_config.py``, ``producer_registry.py``, ``metrics.py``, ``settings.py``) imports FastAPI or
Starlette. Errors are the broker family's typed errors (``headwater.errors``); records arrive
decoded (:class:`RecordSource`, :class:`ProducerRecord`) or as raw RecordBatch v2 bytes.

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
import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import httpx
import orjson

from headwater.errors import (
    BROKER,
    CorruptRecordError,
    HeadwaterError,
    IdempotencyKeyConflictError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    LeaderNotAvailableError,
    MetadataUnavailableError,
    NotControllerError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OutOfOrderSequenceError,
    PartitionNotFoundError,
    RecordTooLargeError,
    ServiceUnavailableError,
    StaleBrokerEpochError,
    StorageError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)
from headwater.records.batch import (
    Record,
    RecordTuple,
    decode_batch,
    encode_batch,
    iter_batches,
)
from headwater.records.compression import DecompressedTooLargeError
from headwater.records.header import BatchHeader
from headwater.records.partitioner import StickyPartitioner, partition_for_key
from headwater.records.validation import validate_records
from headwater.topic_partition import TopicPartition
from headwater.types import BrokerId, Offset, PartitionId, ProducerEpoch, ProducerId, TimestampMs
from headwater_broker import catalog, idempotency, metrics
from headwater_broker.cluster import producer_ids, topic_configs
from headwater_broker.cluster.controller import Controller
from headwater_broker.cluster.election import IsrProposal
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.state import LeaderEpoch, PartitionState, TopicState
from headwater_broker.log.partition import (
    AppendResult,
    FetchData,
    PartitionLog,
    is_disk_failure,
    partition_dir_name,
)
from headwater_broker.peers import Peers
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.replicas import ReplicaManager
from headwater_broker.replication.leader import PartitionLeader
from headwater_broker.replication.manager import Replication
from headwater_broker.settings import BrokerSettings
from headwater_broker.topic_config import (
    TopicConfig,
    effective_configs,
    validate_topic_name,
)
from headwater_kernel.tasks import cancel_and_wait

log = logging.getLogger("headwater.broker")

SHUTDOWN_PATH = "/cluster/controller/shutdown"
KNOWN_HIGH_WATERMARK_WAIT_MS = 5000
"""How long an offsets request at a new leader waits for its high watermark to be known."""


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """One record to produce: the partition asked for (None: the broker picks), key, value."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordSource(Protocol):
    """The records of one produce request, decoded when :meth:`Broker.produce` asks.

    The broker checks the topic first, so what is wrong with the topic is reported before what
    is wrong with the body (``headwater_broker.api.embedded.ProduceBody`` is the REST one).
    """

    def decode(self) -> list[ProducerRecord]: ...


class ProducedOffset(NamedTuple):
    """Where one produced record landed."""

    partition: PartitionId
    offset: Offset


@dataclass(frozen=True)
class ReplicaInfo:
    broker: BrokerId
    leader: bool
    in_sync: bool


@dataclass
class PartitionInfo:
    """A partition as the metadata describes it; offsets from its leader (-1 when unreachable)."""

    partition: PartitionId
    leader: BrokerId
    leader_epoch: LeaderEpoch
    replicas: list[ReplicaInfo]
    isr: list[BrokerId]
    beginning_offset: Offset
    end_offset: Offset


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]


@dataclass(frozen=True)
class RecordsFetch:
    """Decoded records at offsets >= the requested one, and the partition's bounds."""

    records: list[Record]
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


@dataclass
class _Topic:
    """The replicas of one topic this broker holds (``logs``: partition -> its local log)."""

    name: str
    topic_id: str
    overrides: dict[str, str]
    config: TopicConfig
    logs: dict[int, PartitionLog] = field(default_factory=dict)


class Broker:
    """One broker: its replicas' logs, and the cluster it belongs to.

    ``open()`` prepares the data directory; ``start()`` joins the cluster (registers, loads the
    metadata, imports a pre-cluster catalog, waits to be recorded active) and runs upkeep.
    Which replicas exist here and which of them this broker leads is decided by the metadata
    and applied by the replica manager (``replicas.py``) through :meth:`host`,
    :meth:`drop_topic` and :attr:`leading`.
    """

    def __init__(self, settings: BrokerSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.data_dir = settings.data_path
        self.clock = clock
        self.topics: dict[str, _Topic] = {}
        self.leading: dict[TopicPartition, LeaderEpoch] = {}
        """Partitions this broker acts as leader of, at the leader epoch it took them at."""
        self.producer_ids = ProducerRegistry(settings.producer_id_expiration_ms)
        self._sticky = StickyPartitioner()
        self._tasks: list[asyncio.Task[None]] = []
        self.is_open = False
        self._node: ClusterNode | None = None
        self.replicas: ReplicaManager | None = None
        self.replication: Replication | None = None
        self.peers = Peers(settings.forward_timeout_ms, self.broker_id)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

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
                broker_id=self.broker_id,
                broker_epoch=lambda: node.broker_epoch,
                now_ms=self.now_ms,
                send_isr=self._send_isr,
                is_active=lambda b: node.image.is_active(b),
                # A follower's write failing on the disk takes it offline, as a leader's does.
                on_disk_failure=node.take_storage_offline,
                fetch_timeout_ms=self.settings.replica_fetch_timeout_ms,
            )
            node.unreachable_peers = self.replication.unreachable_leaders
            self.replication.start()
            self.replicas = ReplicaManager(self, node)
            await self.replicas.start()
            await self._wait_active()
            await catalog.import_catalog(self)
            await self.replicas.settle()
            catalog.remove_strays(self)
        except BaseException:
            await self._leave()
            raise
        self._tasks.append(asyncio.create_task(self._upkeep_loop()))
        if self.settings.fsync == "interval":
            self._tasks.append(asyncio.create_task(self._fsync_loop()))

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
        await cancel_and_wait(self._tasks)
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self.is_open = False
        await self._leave()
        for plog in self.all_partitions():
            async with plog.lock:
                plog.close()
        await self.peers.close()

    async def _leave(self) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        if self.replication is not None:
            await self.replication.close()
        self.leading.clear()
        if self._node is not None:
            await self._node.stop()

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
        interval = self.settings.fsync_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(_flush_all, self.all_partitions())

    def all_partitions(self) -> list[PartitionLog]:
        return [plog for topic in self.topics.values() for plog in topic.logs.values()]

    async def enforce_retention(self) -> int:
        """Apply every topic's retention now; return how many segments were deleted."""
        deleted = 0
        now = self.now_ms()
        for plog in self.all_partitions():
            deleted += await plog.enforce_retention(now)
            self._update_offset_metrics(plog)
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
        failed = {} if node is None else node.failed_tasks
        lag = 0.0 if node is None else node.metadata_lag_ms()
        current = lag <= self.settings.metadata_max_lag_ms
        return self.is_open and active and not offline and not failed and current, {
            "topics": len(self.topics),
            "data_dir": str(self.data_dir),
            "active": active,
            "storage_offline": offline,
            "metadata_lag_ms": round(lag),
            "failed_tasks": failed,
        }

    # --- replicas (applied by the replica manager) ---------------------------------------------

    def host(self, topic: TopicState, partition: int) -> PartitionLog:
        """This broker's replica of a partition, opened (created if new) on first call."""
        local = self.topics.get(topic.name)
        if local is None:
            overrides = dict(topic.configs)
            local = _Topic(topic.name, topic.topic_id, overrides, _config(overrides))
            self.topics[topic.name] = local
        plog = local.logs.get(partition)
        if plog is None:
            directory = self.data_dir / partition_dir_name(topic.name, partition)
            catalog.claim_directory(directory, topic.topic_id)
            # Replicated: the high watermark is the in-sync replicas' (checkpointed), moved by
            # this broker's leader of the partition; with one replica, its own log end.
            plog = PartitionLog.open(
                directory,
                topic.name,
                PartitionId(partition),
                local.config,
                self.settings.fsync,
                replicated=True,
            )
            now = self.now_ms()
            for pid, entry in plog.producers.entries.items():
                self.producer_ids.touch(pid, min(entry.last_timestamp, now))
            local.logs[partition] = plog
            self._update_offset_metrics(plog)
        return plog

    def set_configs(self, topic: TopicState) -> None:
        """Take a topic's new config overrides (storage uses them from its next step on)."""
        local = self.topics.get(topic.name)
        if local is None or local.overrides == topic.configs:
            return
        local.overrides = dict(topic.configs)
        local.config = _config(local.overrides)
        for plog in local.logs.values():
            plog.config = local.config
        log.info("configs of topic %s: %s", topic.name, local.overrides)

    async def drop_topic(self, name: str) -> None:
        """Delete this broker's replicas of a topic and their data."""
        local = self.topics.get(name)
        if local is None:
            return
        for p in list(local.logs):
            await self.drop_partition(name, p)
        if self.topics.get(name) is local and not local.logs:
            del self.topics[name]
        metrics.forget_topic(name, 0)
        log.info("deleted the replicas of topic %s", name)

    async def drop_partition(self, name: str, partition: int) -> None:
        local = self.topics.get(name)
        plog = None if local is None else local.logs.pop(partition, None)
        if plog is None:
            return
        self.leading.pop(TopicPartition(name, PartitionId(partition)), None)
        if self.replication is not None:
            self.replication.drop(name, partition)
        path = await plog.delete()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
        metrics.forget_partition(name, partition)

    # --- where a partition is served ------------------------------------------------------------

    def _partition_state(self, topic_name: str, partition: int) -> PartitionState:
        image = self.image
        topic = image.topic(topic_name)
        if topic is None:
            raise TopicNotFoundError(f"Topic not found. There is no topic '{topic_name}'.")
        state = image.partition(topic_name, partition)
        if state is None:
            raise PartitionNotFoundError(
                f"Partition not found. Topic '{topic_name}' has {topic.partitions} "
                f"partition(s), 0..{topic.partitions - 1}; asked for {partition}."
            )
        return state

    def leader_url(self, topic_name: str, partition: int) -> str | None:
        """None when this broker leads the partition, else its leader's URL.

        Raises 40401/40402 for what does not exist and 50302 when no broker leads it now.
        """
        state = self._partition_state(topic_name, partition)
        if self._leads(state):
            return None
        leader = self.image.broker(state.leader)
        if state.leader < 0 or leader is None or not leader.active:
            raise _no_leader(state)
        if state.leader == self.broker_id:
            # The metadata names this broker, but it has not taken the leadership (yet).
            raise _no_leader(state)
        return leader.url

    async def find_leader(self, topic_name: str, partition: int) -> str | None:
        """:meth:`leader_url`, patient with changes in flight: a topic created a moment ago
        elsewhere is looked up in the store before 40401, and a leadership the metadata has just
        given this broker is taken before answering (a quick wait), rather than 503 50302."""
        await self._learn(topic_name)
        try:
            return self.leader_url(topic_name, partition)
        except LeaderNotAvailableError:
            if self._partition_state(topic_name, partition).leader != self.broker_id:
                raise
        await self.replicas_settled()
        return self.leader_url(topic_name, partition)

    async def leader_log(self, topic_name: str, partition: int) -> PartitionLog:
        """:meth:`partition`, as patient as :meth:`find_leader`."""
        await self.find_leader(topic_name, partition)
        return self.partition(topic_name, partition)

    async def _learn(self, topic_name: str) -> None:
        """A topic this broker has not seen is looked for in the store once (it may have been
        created through another broker a moment ago), so an admin write reads back anywhere."""
        if self.image.topic(topic_name) is None and self.node.follower.loaded:
            # Best effort, bounded: with the store down the answer stays this image's 40401.
            with contextlib.suppress(MetadataUnavailableError, TimeoutError):
                async with asyncio.timeout(self.settings.metadata_poll_ms / 1000 + 1.0):
                    await self.node.follower.poll()

    def _leads(self, state: PartitionState) -> bool:
        return self.leading.get(state.key) == state.leader_epoch and state.leader == self.broker_id

    def not_leader(self, topic_name: str, partition: int) -> NotLeaderOrFollowerError:
        """The 421 for a partition this broker does not lead, naming the leader."""
        state = self._partition_state(topic_name, partition)
        leader = self.image.broker(state.leader)
        return NotLeaderOrFollowerError(
            f"Broker {self.broker_id} does not lead partition {partition} of topic "
            f"'{topic_name}'; broker {state.leader} does",
            leader_id=state.leader,
            leader_url=None if leader is None else leader.url,
            leader_epoch=state.leader_epoch,
        )

    def leader_role(
        self, topic_name: str, partition: int, plog: PartitionLog | None = None
    ) -> PartitionLeader:
        """This broker's leader role of a partition in the current leader epoch (421 when
        another broker leads it, 503 50302 when none does or this one has not taken it yet).

        ``plog``: the log a request started with; a different one (the topic was deleted and
        created again meanwhile) is refused as not led here.
        """
        current = self.partition(topic_name, partition)
        state = self._partition_state(topic_name, partition)
        leader = (
            None if self.replication is None else self.replication.leader_for(topic_name, partition)
        )
        if (
            leader is None
            or leader.resigned
            or leader.leader_epoch != state.leader_epoch
            or leader.plog is not current
            or (plog is not None and plog is not current)
        ):
            raise _no_leader(state)
        return leader

    def partition(self, topic_name: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads (421 elsewhere, 503 50302 when none does,
        or while this broker's metadata lags the change log past ``metadata_max_lag_ms``)."""
        state = self._partition_state(topic_name, partition)
        lag = self.node.metadata_lag_ms()
        if lag > self.settings.metadata_max_lag_ms:
            raise LeaderNotAvailableError(
                f"Broker {self.broker_id} serves no partition as leader while its metadata is "
                f"{lag:.0f} ms behind the cluster's change log (BROKER_METADATA_MAX_LAG_MS="
                f"{self.settings.metadata_max_lag_ms}): leadership may have moved; retry"
            )
        if not self._leads(state) and self.leader_url(topic_name, partition) is not None:
            raise self.not_leader(topic_name, partition)
        local = self.topics.get(topic_name)
        plog = None if local is None else local.logs.get(partition)
        if plog is None or plog.closed:
            raise _no_leader(state)
        return plog

    # --- topic admin (carried out by the controller) --------------------------------------------

    async def controller_url(self) -> str | None:
        """None when this broker is the active controller, else the controller's URL.

        While no controller is elected (an election in progress, a lease lost to a stall) this
        waits up to two leases for one; then 50305.
        """
        try:
            await self._controller()
        except NotControllerError as exc:
            if exc.controller_url is None:
                raise
            return exc.controller_url
        return None

    async def _controller(self) -> Controller:
        """This broker's controller role if it is the active controller (see controller_url)."""
        deadline = time.monotonic() + 2 * self.settings.controller_lease_ms / 1000
        while True:
            try:
                return self.node.controller_for_admin()
            except NotControllerError as exc:
                if exc.controller_url is not None or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)

    async def replicas_settled(self) -> None:
        """Wait until this broker's replicas reflect its current image (its own admin writes)."""
        if self.replicas is not None:
            await self.replicas.settle()

    async def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, Any] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> TopicDescription:
        """Create a topic (this broker must be the controller: see :meth:`controller_url`)."""
        validate_topic_name(name)
        count = self.settings.default_partitions if partitions is None else partitions
        if replica_assignment is not None and partitions is None:
            count = len(replica_assignment)
        factor = None if replication_factor in (None, -1) else replication_factor
        controller = await self._controller()
        await controller.create_topic(name, count, factor, configs, replica_assignment)
        await self.replicas_settled()
        return await self.describe_topic(name)

    def list_topics(self) -> list[str]:
        return sorted(self.image.topics)

    def _info(self, state: PartitionState) -> PartitionInfo:
        replicas = [ReplicaInfo(b, b == state.leader, b in state.isr) for b in state.replicas]
        info = PartitionInfo(
            state.partition,
            state.leader,
            state.leader_epoch,
            replicas,
            list(state.isr),
            Offset(-1),
            Offset(-1),
        )
        if self._leads(state) and self.replication is not None:
            leader = self.replication.leader_for(state.topic, state.partition)
            if leader is not None and leader.high_watermark_known:
                info.beginning_offset = leader.plog.log_start_offset
                info.end_offset = leader.plog.high_watermark
        return info

    async def partition_info(self, topic_name: str, partition: int) -> PartitionInfo:
        state = self._partition_state(topic_name, partition)
        (info,) = await self._with_offsets([self._info(state)], topic_name)
        return info

    async def _with_offsets(self, infos: list[PartitionInfo], topic: str) -> list[PartitionInfo]:
        """Offsets of partitions led elsewhere, asked of their leaders (-1 when one is down)."""

        async def fill(info: PartitionInfo) -> None:
            if info.end_offset >= 0 or info.leader < 0:
                return
            if info.leader == self.broker_id:
                return  # led here, high watermark not known yet (or not taken yet): -1 for now
            leader = self.image.broker(info.leader)
            if leader is None:
                return
            found = await self.peers.offsets(leader.url, topic, info.partition)
            if found is not None:
                info.beginning_offset, info.end_offset = found

        await asyncio.gather(*(fill(i) for i in infos))
        return infos

    def _topic_state(self, name: str) -> TopicState:
        topic = self.image.topic(name)
        if topic is None:
            raise TopicNotFoundError(f"Topic not found. There is no topic '{name}'.")
        return topic

    def list_partitions(self, name: str) -> list[PartitionInfo]:
        self._topic_state(name)
        return [self._info(p) for p in self.image.partitions_of(name)]

    async def describe_topic(self, name: str) -> TopicDescription:
        topic = self._topic_state(name)
        infos = [self._info(p) for p in self.image.partitions_of(name)]
        return TopicDescription(
            name,
            topic.topic_id,
            await self._with_offsets(infos, name),
            {**effective_configs(topic.configs), **topic.configs},
        )

    async def delete_topic(self, name: str) -> None:
        """Delete a topic everywhere; a topic created later under the name starts at 0."""
        await (await self._controller()).delete_topic(name)
        await self.replicas_settled()

    async def add_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow a topic to ``count`` partitions in total (never shrinks, as Kafka)."""
        await (await self._controller()).create_partitions(name, count)
        await self.replicas_settled()
        return await self.describe_topic(name)

    async def alter_topic_configs(
        self, name: str, set_configs: dict[str, Any], delete: list[str]
    ) -> TopicDescription:
        """Set and delete config overrides of ``name`` at once (Kafka's incremental alter).

        A deleted key goes back to its default; deleting one that is not set is no change. The
        resulting overrides are validated as a create's are, so nothing changes unless all of
        it is valid. Storage takes the new values at once: retention at its next run, segment
        sizes at the next roll, the timestamp type at the next append.
        """
        controller = await self._controller()
        self._topic_state(name)
        both = sorted(set(set_configs) & set(delete))
        if both:
            raise InvalidConfigError(f"Config(s) {', '.join(both)} both set and deleted")
        await controller.alter_configs(name, set_configs, delete)
        await self.replicas_settled()
        return await self.describe_topic(name)

    async def reassign_partition(
        self, topic_name: str, partition: int, replicas: list[int]
    ) -> PartitionState:
        """Start moving a partition to ``replicas`` (this broker must be the controller).

        The new replicas are added and catch up; once all of them are in sync the replica list
        becomes ``replicas`` (the first is the preferred leader) and the others delete their
        copies. The replicas of before cancel a move in progress. Unknown or repeated brokers
        are refused (422 42206) with nothing changed.
        """
        controller = await self._controller()
        self._partition_state(topic_name, partition)
        state = await controller.reassign(topic_name, partition, replicas)
        await self.replicas_settled()
        return state

    def reassignment(self, topic_name: str, partition: int) -> PartitionState:
        """The partition's replica list and reassignment in progress, from this broker's image."""
        return self._partition_state(topic_name, partition)

    # --- produce -----------------------------------------------------------------------------

    async def append_batches(
        self,
        topic_name: str,
        partition: int,
        body: bytearray,
        *,
        acks: int = 1,
        keyed_request: bool = False,
    ) -> list[AppendResult]:
        """Append one or more concatenated RecordBatch v2, validated whole before any is written.

        Only at the partition's leader (421 42101 elsewhere, 503 50302 when none leads it).
        ``acks=-1`` (all): refused before appending when fewer replicas than
        ``min.insync.replicas`` are in sync (503 50303), answered once the high watermark passes
        the batches (503 50304 if the in-sync set shrank below the minimum meanwhile, 421 if
        leadership moved, 504 50401 after ``BROKER_REQUEST_TIMEOUT_MS``). ``keyed_request``:
        a REST produce with an ``Idempotency-Key`` (its batches' producer id is derived from the
        key, not issued by the cluster: see ``idempotency.py``).
        """
        await self._auto_create(topic_name)
        plog = await self.leader_log(topic_name, partition)
        if not body:
            raise CorruptRecordError("Empty body: expected one or more RecordBatch v2")
        batches = list(iter_batches(body))
        limit = plog.config.max_message_bytes
        records = 0
        for pos, header in batches:
            if header.size > limit:
                raise RecordTooLargeError(
                    f"Batch at position {pos} is {header.size} bytes; the topic's "
                    f"max.message.bytes is {limit}"
                )
            if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
                # As Kafka's log validator: a batch's offsets must be its records, one each,
                # or a producer could claim offsets it never fills.
                raise InvalidRecordError(
                    f"Batch at position {pos} has {header.records_count} record(s) but "
                    f"lastOffsetDelta {header.last_offset_delta}: expected records - 1"
                )
            if header.is_transactional or header.is_control:
                raise InvalidRecordError(
                    f"Batch at position {pos} is transactional or a control batch; "
                    "transactions are not supported"
                )
            if self.settings.validate_records:
                self._validate(body, pos, header, plog.config)
            if header.producer_id >= 0:
                if header.base_sequence < 0:
                    raise InvalidRecordError(
                        f"Batch at position {pos} has producer id {header.producer_id} but no "
                        "base sequence"
                    )
                if not (keyed_request and idempotency.is_keyed(header.producer_id)):
                    await self._check_producer(header.producer_id, header.producer_epoch)
            records += header.records_count
        # Asked again after the awaits above: leadership may have moved while the producer id
        # was looked up. The append is the current leader role's or none at all -- a replica this
        # broker has stopped leading never takes a produce (docs/cluster.md, "Under faults").
        leader = self.leader_role(topic_name, partition, plog)
        now = self.now_ms()
        timeout_s = self.settings.request_timeout_ms / 1000
        try:
            results = await leader.append(body, batches, now, acks=acks, timeout_s=timeout_s)
        except StorageError as exc:
            if is_disk_failure(exc):
                self.node.take_storage_offline(exc.message)
            raise
        for _pos, header in batches:
            if header.producer_id >= 0 and not idempotency.is_keyed(header.producer_id):
                self.producer_ids.touch(header.producer_id, now)
        metrics.PRODUCE_BYTES.labels(topic_name).inc(len(body))
        metrics.PRODUCE_RECORDS.labels(topic_name).inc(records)
        self._update_offset_metrics(plog)
        return results

    def max_decompressed(self, config: TopicConfig) -> int:
        """The most one compressed batch's records may decompress to in a topic.

        ``BROKER_MAX_DECOMPRESSED_BYTES``, or the topic's ``max.message.bytes`` where that is
        larger: a batch never stops being accepted for being sent compressed.
        """
        return max(self.settings.max_decompressed_bytes, config.max_message_bytes)

    def _validate(
        self, body: bytearray, pos: int, header: BatchHeader, config: TopicConfig
    ) -> None:
        cap = self.max_decompressed(config)
        try:
            validate_records(
                body, pos, header, max_decompressed=cap, columnar=self.settings.validate_columnar
            )
        except DecompressedTooLargeError as exc:
            raise DecompressedTooLargeError(
                f"{exc.message} (BROKER_MAX_DECOMPRESSED_BYTES, or the topic's max.message.bytes "
                "when larger); nothing was appended"
            ) from None

    # --- replication ---------------------------------------------------------------------------

    def replication_settings(self, topic_name: str, replica_count: int) -> tuple[int, int]:
        """``min.insync.replicas`` and ``replica.lag.time.max.ms`` of a topic's partition.

        A topic without ``min.insync.replicas`` takes ``BROKER_MIN_INSYNC_REPLICAS``, at most
        the partition's replica count (so a one-replica topic still takes acks=all writes where
        the brokers default to 2); a topic's own setting is taken as it is.
        """
        topic = self.image.topic(topic_name)
        configs = {} if topic is None else topic.configs
        configured = configs.get(topic_configs.MIN_INSYNC_REPLICAS)
        if configured is None:
            min_isr = max(1, min(self.settings.min_insync_replicas, replica_count))
        else:
            min_isr = int(configured)
        lag = int(
            configs.get(
                topic_configs.REPLICA_LAG_TIME_MAX_MS, str(self.settings.replica_lag_time_max_ms)
            )
        )
        return min_isr, lag

    async def _send_isr(self, proposal: IsrProposal) -> PartitionState:
        """Send a leader's in-sync proposal to the controller (itself, or over HTTP)."""
        node = self.node
        if node.is_controller:
            return await node.controller_for_admin().alter_isr(proposal)
        url = node.image.controller_url()
        if url is None:
            raise NotControllerError("No controller now: the in-sync proposal waits")
        assert self.replication is not None
        answer = await self.replication.client.post(
            url.rstrip("/") + "/cluster/controller/isr",
            json=isr_proposal_body(proposal),
            # A controller that does not answer within its lease is likely gone: propose again
            # (to its successor) rather than hold the in-sync set where it is.
            timeout=self.settings.controller_lease_ms / 1000,
        )
        if answer.status_code != 200:
            raise BROKER.from_body(answer.status_code, _json_or_text(answer.content))
        return PartitionState.from_body(answer.json())

    async def controlled_shutdown(self) -> None:
        """Move every leadership off this broker before it stops (docs/cluster.md, "Controlled
        shutdown"): ask the controller to record it ``shutting_down`` -- it leaves the ISRs and
        its partitions get leaders among the other in-sync replicas -- then wait until this
        broker leads nothing. Bounded by ``controlled_shutdown_timeout_ms``; the broker stops
        either way. Requests that reach it meanwhile are answered 421 naming the new leader.
        """
        node = self._node
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
            image = node.image
            if not image.led_by(me) and not self.leading:
                log.info(
                    "broker %d leads nothing after %.0f ms of controlled shutdown",
                    me,
                    (time.monotonic() - started) * 1000,
                )
                return
            if self.replicas is not None:
                await self.replicas.settle(max(0.0, deadline - time.monotonic()))
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
        assert self.replication is not None
        answer = await self.replication.client.post(
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

    def replication_hint(self, topic_name: str, partition: int) -> NotLeaderOrFollowerError:
        """The 42101 entry of a replica fetch for a partition this broker does not lead."""
        try:
            return self.not_leader(topic_name, partition)
        except (TopicNotFoundError, PartitionNotFoundError, ServiceUnavailableError) as exc:
            return NotLeaderOrFollowerError(exc.message)

    async def _check_producer(self, producer_id: int, epoch: int) -> None:
        if self.producer_ids.needs_lookup(producer_id, epoch):
            store = self.node.store
            stored = await store.call(producer_ids.current_epoch, store, producer_id)
            self.producer_ids.judge(producer_id, epoch, stored, self.now_ms())

    async def _auto_create(self, topic_name: str) -> None:
        """With BROKER_AUTO_CREATE_TOPICS, an unknown topic is created with the defaults (by the
        controller, wherever it is) before a produce goes on."""
        if not self.is_open:
            raise ServiceUnavailableError(
                f"Broker {self.broker_id} is closing (shutting down, or another process took its "
                "id); nothing was written: retry"
            )
        await self._learn(topic_name)
        if not self.settings.auto_create_topics or self.image.topic(topic_name) is not None:
            return
        with contextlib.suppress(TopicAlreadyExistsError):
            url = await self.controller_url()
            if url is None:
                await self.create_topic(topic_name)
            else:
                validate_topic_name(topic_name)
                await self.peers.create_topic(url, topic_name)
        deadline = time.monotonic() + 2.0
        while self.image.topic(topic_name) is None and time.monotonic() < deadline:
            await self.node.follower.poll()
            await asyncio.sleep(self.settings.metadata_poll_ms / 1000)
        await self.replicas_settled()

    async def produce(
        self,
        topic_name: str,
        path_partition: int | None,
        source: RecordSource,
        *,
        forwarded: bool = False,
        idempotency_key: str | None = None,
    ) -> list[ProducedOffset]:
        """REST Proxy v2 produce: every record validated and encoded before any is appended.

        ``source`` is decoded once the topic (and ``path_partition``) are known to exist.
        Records for partitions led elsewhere are relayed to their leaders (a request that was
        itself relayed here is not relayed again: 421). Returns where each record landed, in
        request order. With ``idempotency_key``, a retry of the same request is answered with
        the first one's offsets, wherever and whenever within the key window it arrives
        (``idempotency.py``); a retry with other records is refused (409 40910).
        """
        await self._auto_create(topic_name)
        topic = self._topic_state(topic_name)
        count = topic.partitions
        if path_partition is not None:
            self._partition_state(topic_name, path_partition)
        decoded = source.decode()
        by_partition: dict[int, list[tuple[int, RecordTuple]]] = {}
        for i, record in enumerate(decoded):
            partition, key, value = record.partition, record.key, record.value
            if path_partition is not None:
                if partition is not None and partition != path_partition:
                    raise InvalidRecordError(
                        f"records[{i}].partition {partition} differs from the path's partition "
                        f"{path_partition}"
                    )
                partition = path_partition
            elif partition is not None:
                self._partition_state(topic_name, partition)
            elif key is not None:
                partition = partition_for_key(key, count)
            elif idempotency_key is not None:
                partition = idempotency.partition_of(idempotency_key, count)
            else:
                size = len(value or b"")
                partition = self._sticky.partition(topic_name, count, size)
            by_partition.setdefault(partition, []).append((i, (key, value, record.headers)))
        # Where each partition goes is settled before anything is appended.
        leaders = {p: await self.find_leader(topic_name, p) for p in by_partition}
        if forwarded and any(url is not None for url in leaders.values()):
            p = next(p for p, url in leaders.items() if url is not None)
            raise self.not_leader(topic_name, p)
        now = self.now_ms()
        # Each partition's records as one batch of the key's producer, epoch 0, sequence 0.
        pid = -1 if idempotency_key is None else idempotency.producer_id(idempotency_key)
        first = -1 if idempotency_key is None else 0
        encoded: list[tuple[int, list[int], bytearray]] = []
        limit = _config(topic.configs).max_message_bytes
        for partition, items in by_partition.items():
            if leaders[partition] is not None:
                continue
            batch = bytearray(
                encode_batch(
                    [r for _i, r in items],
                    timestamp_ms=now,
                    producer_id=pid,
                    producer_epoch=first,
                    base_sequence=first,
                )
            )
            if len(batch) > limit:
                raise RecordTooLargeError(
                    f"The records for partition {partition} encode to a {len(batch)}-byte batch; "
                    f"the topic's max.message.bytes is {limit}"
                )
            encoded.append((partition, [i for i, _r in items], batch))
        unset = ProducedOffset(PartitionId(0), Offset(0))
        offsets = [unset] * len(decoded)

        async def here(partition: int, indexes: list[int], batch: bytearray) -> None:
            # acks=all, as REST Proxy's producer: answered once the records are below the high
            # watermark, so a consumer that reads right after the answer sees them.
            try:
                (result,) = await self.append_batches(
                    topic_name, partition, batch, acks=-1, keyed_request=pid >= 0
                )
            except OutOfOrderSequenceError:
                if pid < 0:
                    raise
                raise IdempotencyKeyConflictError(
                    f"{idempotency.HEADER} {idempotency_key!r} was used for a request with other "
                    f"records for partition {partition} of topic '{topic_name}'; nothing was "
                    "appended: use a new key for a new request"
                ) from None
            for n, i in enumerate(indexes):
                offsets[i] = ProducedOffset(PartitionId(partition), Offset(result.base_offset + n))

        async def there(partition: int, url: str) -> None:
            items = by_partition[partition]
            landed = await self.peers.produce(
                url,
                topic_name,
                partition,
                [r for _i, r in items],
                self.image.offset,
                idempotency_key=idempotency_key,
            )
            for (i, _r), offset in zip(items, landed, strict=True):
                offsets[i] = ProducedOffset(PartitionId(partition), offset)

        # The partitions are written side by side: each waits for its own replicas.
        await asyncio.gather(
            *(here(*args) for args in encoded),
            *(there(p, url) for p, url in leaders.items() if url is not None),
        )
        return offsets

    async def init_producer(
        self, producer_id: int | None, epoch: int | None
    ) -> tuple[ProducerId, ProducerEpoch]:
        """A producer id from the cluster-wide blocks, or an existing id's epoch bumped."""
        pid, issued = await self.node.producer_ids.init_producer(producer_id, epoch)
        self.producer_ids.learn(pid, issued, self.now_ms())
        return pid, issued

    # --- fetch -------------------------------------------------------------------------------

    async def fetch(
        self, topic_name: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int
    ) -> FetchData:
        """Stored batches from ``offset``; at the end, wait up to ``max_wait_ms`` for data."""
        plog = self.partition(topic_name, partition)
        if offset < 0:
            raise InvalidOffsetError(f"Offset must be >= 0, got {offset}")
        if max_bytes < 1:
            raise InvalidOffsetError(f"max_bytes must be >= 1, got {max_bytes}")
        plog.check_offset(offset)
        if offset >= plog.high_watermark and max_wait_ms > 0:
            await plog.wait_for_data(offset, max_wait_ms / 1000)
            # Deleted (40401) or led elsewhere now (421) while waiting.
            plog = self.partition(topic_name, partition)
        data = plog.read(offset, max_bytes)
        if data.data:
            metrics.FETCH_BYTES.labels(topic_name).inc(len(data.data))
            metrics.FETCH_RECORDS.labels(topic_name).inc(data.records)
        return data

    async def fetch_records(
        self,
        topic_name: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        max_records: int | None,
    ) -> RecordsFetch:
        """Like :meth:`fetch`, decoded: records at offsets >= ``offset`` only."""
        if max_records is not None and max_records < 1:
            raise InvalidOffsetError(f"max_records must be >= 1, got {max_records}")
        data = await self.fetch(topic_name, partition, offset, max_bytes, max_wait_ms)
        records: list[Record] = []
        buf = data.data
        pos = 0
        # The cap of ingest again: a batch stored with validation off, or before the cap was
        # lowered, is refused (40003) rather than inflated whole into this broker's memory.
        cap = self.max_decompressed(self.partition(topic_name, partition).config)
        while pos < len(buf) and (max_records is None or len(records) < max_records):
            header, batch_records = decode_batch(buf, pos, max_decompressed=cap)
            pos += header.size
            records.extend(r for r in batch_records if r.offset >= offset)
        next_offset = data.next_offset
        if max_records is not None and len(records) > max_records:
            del records[max_records:]
            next_offset = Offset(records[-1].offset + 1)
        return RecordsFetch(records, next_offset, data.high_watermark, data.log_start_offset)

    async def offsets(self, topic_name: str, partition: int) -> tuple[Offset, Offset]:
        """Log start and high watermark of a partition this broker leads.

        The end offset never goes backwards across a leader change: a new leader answers once
        its high watermark has reached the start of its epoch (a fetch round of its followers),
        waiting briefly for that, else 503 50307 (Kafka's KIP-207).
        """
        plog = (await self._known_leader(topic_name, partition)).plog
        return plog.log_start_offset, plog.high_watermark

    async def lookup_offset(
        self, topic_name: str, partition: int, timestamp: int
    ) -> tuple[Offset, TimestampMs] | None:
        """Earliest offset whose timestamp is >= ``timestamp`` (None when there is none), among
        the records below the high watermark once it is known (see :meth:`offsets`)."""
        leader = await self._known_leader(topic_name, partition)
        return leader.plog.lookup_timestamp(timestamp)

    async def _known_leader(self, topic_name: str, partition: int) -> PartitionLeader:
        leader = self.leader_role(topic_name, partition)
        wait_s = min(self.settings.request_timeout_ms, KNOWN_HIGH_WATERMARK_WAIT_MS) / 1000
        if not await leader.wait_high_watermark_known(wait_s):
            raise OffsetNotAvailableError(
                f"Broker {self.broker_id} leads partition {partition} of topic '{topic_name}' "
                f"since leader epoch {leader.leader_epoch}, and its high watermark "
                f"({leader.plog.high_watermark}) has not reached the epoch's start offset "
                f"({leader.epoch_start_offset}) yet; retry"
            )
        return self.leader_role(topic_name, partition)

    def _update_offset_metrics(self, plog: PartitionLog) -> None:
        labels = (plog.topic, str(plog.partition))
        metrics.LOG_END_OFFSET.labels(*labels).set(plog.log_end_offset)
        metrics.LOG_START_OFFSET.labels(*labels).set(plog.log_start_offset)


def _controller_event(event: str, fields: dict[str, Any]) -> None:
    """The controller role was won or lost: the gauge follows at once, not at the next change."""
    metrics.ACTIVE_CONTROLLER.set(1 if event == "elected" else 0)


def _config(overrides: dict[str, str]) -> TopicConfig:
    return TopicConfig.from_overrides(overrides)


def _no_leader(state: PartitionState) -> LeaderNotAvailableError:
    return LeaderNotAvailableError(
        f"Partition {state.partition} of topic '{state.topic}' has no leader now "
        f"(leader epoch {state.leader_epoch}); retry"
    )


def _flush_all(logs: list[PartitionLog]) -> None:
    """fdatasync every partition's active segment (runs in a worker thread)."""
    for plog in logs:
        plog.flush()


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
