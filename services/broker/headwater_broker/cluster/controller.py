"""The controller: the one broker that changes cluster metadata, while it holds the lease.

Every broker runs a :class:`Controller`; at most one holds the lease (``lease.py``) and acts.
Acting means: decide from the metadata image with the pure functions (``liveness.py`` for brokers,
``election.py`` for partitions, ``placement.py`` for new replicas), then write the decision as
one compare-and-set transaction (``store.MetadataStore.write_changes``) and advance the image
with the changes it wrote. Decisions and writes are serialized by one lock, so each decision is
made from the image its write's ``seen`` offset names.

The loop (:meth:`Controller.run`) has two tasks: the lease task campaigns every heartbeat
interval and, once elected, renews every lease/3; the work task reconciles every heartbeat
interval (fence, unfence, elect leaders, restore preferred leaders, finish reassignments) and
prunes old changes. Admin operations (topic create/delete/grow/configs, reassignment, ISR
proposals, controlled shutdown) are methods the broker's routes call when this broker is the
controller; elsewhere they raise ``NotControllerError`` naming the controller to forward to.
Tests drive the same methods step by step: :meth:`campaign_or_renew` and :meth:`reconcile`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from headwater.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    MetadataUnavailableError,
    NotControllerError,
    NotLeaderOrFollowerError,
    PartitionNotFoundError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)
from headwater.topic_partition import TopicPartition
from headwater.types import BrokerId, PartitionId
from headwater_broker import topic_config
from headwater_broker.cluster import election, placement
from headwater_broker.cluster.changes import Change, Mutation, PartitionWrite, TopicDeletion
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.lease import ControllerLease, Lease
from headwater_broker.cluster.liveness import broker_transitions
from headwater_broker.cluster.metadata_follower import MetadataFollower
from headwater_broker.cluster.session import read_sessions
from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.cluster.state import (
    BrokerState,
    BrokerStateName,
    ControllerEpoch,
    LeaderEpoch,
    PartitionEpoch,
    PartitionState,
    TopicState,
)
from headwater_broker.cluster.store import ImageBehindError, MetadataStore
from headwater_broker.topic_config import validate_topic_name

log = logging.getLogger("headwater.broker.cluster")

MAX_PARTITIONS = 10_000
FULL_PASS_S = 10.0
"""Every partition is re-examined this often even when no event pointed at it (a safety net)."""
PRUNE_EVERY_S = 60.0

Decision = Callable[[MetadataImage], list[Mutation]]
ControllerEvent = Callable[[str, dict[str, Any]], None]
"""Told ``("elected", {"epoch"})`` and ``("stepped_down", {"epoch", "reason"})``."""


class Controller:
    """The controller role of one broker (idle unless it holds the lease)."""

    def __init__(
        self,
        store: MetadataStore,
        follower: MetadataFollower,
        settings: ClusterSettings,
        broker_id: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_event: ControllerEvent | None = None,
    ) -> None:
        self.store = store
        self.follower = follower
        self.settings = settings
        self.broker_id = BrokerId(broker_id)
        self.clock = clock
        self.on_event = on_event
        self.lease = ControllerLease(
            store, broker_id, settings.controller_lease_ms, settings.lease_renewal_ms, clock
        )
        self._lock = asyncio.Lock()
        self._dirty: set[TopicPartition] = set()
        self._full_pass_due = True
        self._last_full_pass = 0.0
        self._last_prune = 0.0
        self._reports: election.Reports = election.NO_REPORTS
        """The fresh sessions' reports of unreachable leaders, as of the last reconcile."""
        # Set when work should not wait for the next tick: a new term's full pass, as soon as
        # the image has caught up with the election (a starting broker is active sooner).
        self._work_due = asyncio.Event()

    # --- the lease ------------------------------------------------------------------------------

    @property
    def epoch(self) -> ControllerEpoch | None:
        held = self.lease.held
        return None if held is None else held.epoch

    @property
    def active(self) -> bool:
        """Holds a valid lease and its image has caught up with its own election."""
        held = self.lease.held
        return (
            held is not None
            and self.lease.valid()
            and self.follower.loaded
            and self.follower.image.offset >= held.election_offset
        )

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, fields)

    def _step_down(self, reason: str) -> None:
        held = self.lease.held
        self.lease.drop()
        if held is not None:
            log.warning(
                "broker %d stops being controller (epoch %d): %s",
                self.broker_id,
                held.epoch,
                reason,
            )
            self._emit("stepped_down", epoch=held.epoch, reason=reason)

    async def campaign_or_renew(self) -> bool:
        """One turn of the lease: campaign when not holding it; renew when due. Returns
        :attr:`active`."""
        held = self.lease.held
        if held is None:
            lease = await self.lease.campaign()
            if lease is None:
                return False
            self._elected(lease)
        elif not self.lease.valid():
            self._step_down("the lease ran out before it could be renewed")
            return False
        elif self.lease.renewal_due() and not await self.lease.renew():
            self._step_down("another broker was elected controller")
            return False
        held = self.lease.held
        if held is not None and self.follower.image.offset < held.election_offset:
            try:
                await self.follower.wait_for(
                    held.election_offset, self.settings.controller_lease_ms / 1000
                )
            except TimeoutError:
                return False
        if self.active and self._full_pass_due:
            self._work_due.set()  # a new term (or one not yet worked): its full pass now
        return self.active

    def _elected(self, lease: Lease) -> None:
        log.info("broker %d is controller, epoch %d", self.broker_id, lease.epoch)
        self._full_pass_due = True
        self._reports = election.NO_REPORTS  # from an earlier term: read afresh
        self._dirty.clear()
        self._last_prune = self.clock()
        self._emit("elected", epoch=lease.epoch)

    async def resign(self) -> None:
        """Give the lease up (clean shutdown); waits for a write in progress to finish."""
        async with self._lock:
            held = self.lease.held
            await self.lease.resign()
            if held is not None:
                self._emit("stepped_down", epoch=held.epoch, reason="resigned")

    # --- writing --------------------------------------------------------------------------------

    def _acting(self) -> Lease:
        held = self.lease.held
        if held is None or not self.active:
            image = self.follower.image if self.follower.loaded else None
            controller = -1 if image is None else image.controller.broker_id
            url = None if image is None else image.controller_url()
            if controller == self.broker_id:
                controller, url = -1, None  # the image still names us: no controller now
            raise NotControllerError(
                f"Broker {self.broker_id} is not the controller"
                + (f"; broker {controller} is" if controller >= 0 else "; none is elected now"),
                controller_id=controller,
                controller_url=url,
            )
        return held

    async def _commit(self, decide: Decision) -> list[Change]:
        """Decide from the current image and write the decision; [] when nothing changes."""
        for _attempt in range(3):
            async with self._lock:
                held = self._acting()
                image = self.follower.image
                mutations = decide(image)
                if not mutations:
                    return []
                try:
                    changes = await self.store.call(
                        self.store.write_changes,
                        held.epoch,
                        self.broker_id,
                        image.offset,
                        mutations,
                    )
                except StaleControllerEpochError as exc:
                    self._step_down(exc.message)
                    raise
                except ImageBehindError:
                    await self.follower.poll()
                    continue
                await self.follower.advance(changes)
                return changes
        raise NotControllerError("The controller's metadata kept changing underneath it; retry")

    # --- the work loop --------------------------------------------------------------------------

    async def reconcile(self) -> list[Change]:
        """Record registrations, fence and unfence brokers, and fix every partition's leader,
        ISR and reassignment that needs it: one transaction (none when nothing changes)."""
        if not self.active:
            return []
        now_ms, sessions = await self.store.call(read_sessions, self.store)
        may_fence = self.store.contact_ms() >= self.settings.session_timeout_ms
        # Only a live broker's word counts: a report outlives a broker that stopped heartbeating.
        reports = {
            s.broker_id: s.unreachable
            for s in sessions
            if s.unreachable and now_ms - s.heartbeat_ms <= self.settings.session_timeout_ms
        }
        self._reports = reports
        full = (
            self._full_pass_due
            or bool(reports)
            or self.clock() - self._last_full_pass >= FULL_PASS_S
        )
        dirty, self._dirty = self._dirty, set()

        def decide(image: MetadataImage) -> list[Mutation]:
            changed = broker_transitions(
                image,
                sessions,
                now_ms,
                self.settings.session_timeout_ms,
                may_fence,
                image.offset + 1,
            )
            brokers = {**image.brokers, **{b.broker_id: b for b in changed}}
            if changed or full:
                candidates: Iterable[PartitionState] = image.all_partitions()
            else:
                found = (image.partition(tp.topic, tp.partition) for tp in dirty)
                candidates = [p for p in found if p is not None]
            return [*changed, *_reconciled(image, candidates, brokers, reports)]

        try:
            changes = await self._commit(decide)
        except BaseException:
            self._dirty |= dirty
            raise
        if full:
            self._full_pass_due = False
            self._last_full_pass = self.clock()
        return changes

    async def prune(self) -> int:
        """Delete changes older than the retention (keeping the newest)."""
        held = self._acting()
        try:
            pruned = await self.store.call(
                self.store.prune_changes,
                held.epoch,
                self.broker_id,
                self.settings.change_retention_ms,
            )
        except StaleControllerEpochError as exc:
            self._step_down(exc.message)
            raise
        self._last_prune = self.clock()
        return pruned

    async def run(self) -> None:
        """Campaign, renew and work until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._lease_loop())
            tasks.create_task(self._work_loop())

    async def _lease_loop(self) -> None:
        failing = False
        while True:
            try:
                await self.campaign_or_renew()
                failing = False
            except MetadataUnavailableError as exc:
                if not failing:
                    log.warning("controller lease: metadata store unavailable: %s", exc)
                failing = True
            except Exception:
                log.exception("controller lease step failed")
            held = self.lease.held
            if held is None:
                delay = self.settings.heartbeat_interval_ms / 1000
            else:
                due = held.renewed_at + self.settings.lease_renewal_ms / 1000
                delay = min(
                    max(0.01, due - self.clock()), self.settings.heartbeat_interval_ms / 1000
                )
            await asyncio.sleep(delay)

    async def _work_loop(self) -> None:
        while True:
            if self.active:
                try:
                    await self.reconcile()
                    if self.clock() - self._last_prune >= PRUNE_EVERY_S:
                        await self.prune()
                except (NotControllerError, StaleControllerEpochError):
                    pass  # stepped down; the lease loop campaigns again
                except MetadataUnavailableError as exc:
                    log.warning("controller: metadata store unavailable: %s", exc)
                except Exception:
                    log.exception("controller reconcile failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._work_due.wait(), self.settings.heartbeat_interval_ms / 1000
                )
            self._work_due.clear()

    # --- admin operations -----------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int | None = None,
        configs: Mapping[str, Any] | None = None,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicState:
        """Create a topic with its partitions placed over the active brokers.

        ``assignment`` (Kafka's replica assignment: one replica list per partition, the first
        the preferred leader) places the partitions explicitly on registered brokers instead.
        """
        validate_topic_name(name)
        _check_partition_count(partitions)
        overrides = topic_config.validate(configs or {})
        topic_id = str(uuid.uuid4())

        def decide(image: MetadataImage) -> list[Mutation]:
            if name in image.topics:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists")
            if assignment is not None:
                assignments = _checked_assignment(image, assignment, partitions)
            else:
                brokers = placement.candidates(image)
                factor = placement.check_replication_factor(replication_factor, len(brokers))
                load = placement.Load.of(image)
                assignments = placement.place(brokers, partitions, factor, load, start=image.offset)
            topic = TopicState(name, topic_id, partitions, overrides)
            return [topic, *_new_partitions(topic, 0, assignments)]

        await self._commit(decide)
        return self._topic(name)

    async def delete_topic(self, name: str) -> None:
        def decide(image: MetadataImage) -> list[Mutation]:
            topic = _existing_topic(image, name)
            return [TopicDeletion(topic.name, topic.topic_id)]

        await self._commit(decide)

    async def create_partitions(self, name: str, count: int) -> TopicState:
        """Grow a topic to ``count`` partitions in total (never shrinks, as Kafka)."""
        _check_partition_count(count)

        def decide(image: MetadataImage) -> list[Mutation]:
            topic = _existing_topic(image, name)
            if count <= topic.partitions:
                raise InvalidPartitionsError(
                    f"Topic '{name}' has {topic.partitions} partition(s); the new count must be "
                    f"larger, got {count}"
                )
            existing = image.partitions_of(name)
            factor = len(existing[0].target_replicas) if existing else 1
            brokers = placement.candidates(image)
            placement.check_replication_factor(factor, len(brokers))
            load = placement.Load.of(image)
            assignments = placement.place(
                brokers, count - topic.partitions, factor, load, start=image.offset
            )
            grown = replace(topic, partitions=count)
            return [grown, *_new_partitions(grown, topic.partitions, assignments)]

        await self._commit(decide)
        return self._topic(name)

    async def alter_configs(
        self, name: str, set_configs: Mapping[str, Any], delete: Sequence[str] = ()
    ) -> TopicState:
        """Incrementally set and delete config overrides (deleting one restores its default)."""
        topic_config.check_known(delete)

        def decide(image: MetadataImage) -> list[Mutation]:
            topic = _existing_topic(image, name)
            merged: dict[str, Any] = {k: v for k, v in topic.configs.items() if k not in delete}
            merged.update(set_configs)
            normalized = topic_config.validate(merged)
            if normalized == topic.configs:
                return []
            return [replace(topic, configs=normalized)]

        await self._commit(decide)
        # unclean.leader.election.enable may have changed what the partitions can elect.
        self._dirty.update(p.key for p in self.follower.image.partitions_of(name))
        return self._topic(name)

    async def reassign(self, topic: str, partition: int, replicas: Sequence[int]) -> PartitionState:
        """Start moving a partition to ``replicas`` (the new ones catch up, join the ISR, then the
        list switches and the old ones leave); the same list as before cancels one in progress."""

        def decide(image: MetadataImage) -> list[Mutation]:
            p = _existing_partition(image, topic, partition)
            started = election.start_reassignment(p, [BrokerId(b) for b in replicas], image.brokers)
            unclean = topic_config.unclean_allowed(image.topics[topic].configs)
            after = election.reconcile(started, image.brokers, unclean) or started
            after = replace(after, partition_epoch=PartitionEpoch(p.partition_epoch + 1))
            if replace(after, partition_epoch=p.partition_epoch) == p:
                return []
            return [PartitionWrite(after, p)]

        await self._commit(decide)
        return _existing_partition(self.follower.image, topic, partition)

    async def alter_isr(self, proposal: election.IsrProposal) -> PartitionState:
        """Commit a leader's in-sync proposal (compare-and-set on its leader and partition
        epochs) and return the partition's state; stale proposals get typed errors."""

        def decide(image: MetadataImage) -> list[Mutation]:
            p = _existing_partition(image, proposal.topic, proposal.partition)
            if election.cut_off_leader(p, image.brokers, self._reports):
                # Its followers stopped fetching because they cannot reach it: the leadership
                # moves (reconcile), rather than the ISR shrinking to a leader that is cut off.
                raise NotLeaderOrFollowerError(
                    f"{p.topic}-{p.partition}: every other in-sync replica reports broker "
                    f"{p.leader} unreachable; its leadership moves"
                )
            after = election.apply_isr_proposal(p, proposal, image.brokers)
            return [] if after is p else [PartitionWrite(after, p)]

        await self._commit(decide)
        # A grown ISR may complete a reassignment or bring the preferred leader back.
        self._dirty.add(TopicPartition(proposal.topic, PartitionId(proposal.partition)))
        return _existing_partition(self.follower.image, proposal.topic, proposal.partition)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Mark a broker shutting down and move its leaderships to other in-sync replicas.

        Returns the partitions it still leads (none, unless no other replica could take over).
        """

        def decide(image: MetadataImage) -> list[Mutation]:
            broker = image.brokers.get(BrokerId(broker_id))
            if broker is None or broker.epoch != broker_epoch:
                current = "not registered" if broker is None else f"at epoch {broker.epoch}"
                raise StaleBrokerEpochError(
                    f"Broker {broker_id} epoch {broker_epoch} cannot shut down: it is {current}"
                )
            if broker.state is not BrokerStateName.ACTIVE:
                return []
            leaving = replace(broker, state=BrokerStateName.SHUTTING_DOWN)
            brokers = {**image.brokers, leaving.broker_id: leaving}
            involved = [
                p for p in image.all_partitions() if p.leader == broker_id or broker_id in p.isr
            ]
            return [leaving, *_reconciled(image, involved, brokers)]

        await self._commit(decide)
        return [p.key for p in self.follower.image.led_by(broker_id)]

    def _topic(self, name: str) -> TopicState:
        return _existing_topic(self.follower.image, name)


def _reconciled(
    image: MetadataImage,
    partitions: Iterable[PartitionState],
    brokers: Mapping[BrokerId, BrokerState],
    reports: election.Reports = election.NO_REPORTS,
) -> list[Mutation]:
    writes: list[Mutation] = []
    for p in partitions:
        topic = image.topics.get(p.topic)
        unclean = topic is not None and topic_config.unclean_allowed(topic.configs)
        after = election.reconcile(p, brokers, unclean, reports)
        if after is not None:
            writes.append(PartitionWrite(after, p))
    return writes


def _new_partitions(
    topic: TopicState, first: int, assignments: Sequence[tuple[BrokerId, ...]]
) -> list[Mutation]:
    # A new partition's replicas all hold its (empty) log: every one starts in sync.
    return [
        PartitionWrite(
            PartitionState(
                topic=topic.name,
                topic_id=topic.topic_id,
                partition=PartitionId(first + i),
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
                leader_epoch=LeaderEpoch(0),
                partition_epoch=PartitionEpoch(0),
            ),
            None,
        )
        for i, replicas in enumerate(assignments)
    ]


def _checked_assignment(
    image: MetadataImage, assignment: Sequence[Sequence[int]], partitions: int
) -> list[tuple[BrokerId, ...]]:
    if len(assignment) != partitions:
        raise InvalidReplicaAssignmentError(
            f"The replica assignment has {len(assignment)} list(s) for {partitions} partition(s)"
        )
    checked = []
    for p, replicas in enumerate(assignment):
        ids = tuple(BrokerId(int(b)) for b in replicas)
        if not ids or len(set(ids)) != len(ids):
            raise InvalidReplicaAssignmentError(
                f"Partition {p}: replicas {list(ids)} must be distinct and at least one"
            )
        unknown = [b for b in ids if b not in image.brokers]
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Partition {p}: broker(s) {unknown} are not registered in this cluster"
            )
        checked.append(ids)
    return checked


def _check_partition_count(count: int) -> None:
    if not 1 <= count <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {count}"
        )


def _existing_topic(image: MetadataImage, name: str) -> TopicState:
    topic = image.topics.get(name)
    if topic is None:
        raise TopicNotFoundError(f"Topic not found. There is no topic '{name}'.")
    return topic


def _existing_partition(image: MetadataImage, topic: str, partition: int) -> PartitionState:
    _existing_topic(image, topic)
    state = image.partition(topic, partition)
    if state is None:
        raise PartitionNotFoundError(
            f"Partition not found. Topic '{topic}' has no partition {partition}."
        )
    return state
