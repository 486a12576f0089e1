"""The coordinator's domain core: what each route asks of groups, offsets and the brokers.

Every HTTP route is one method of :class:`Coordinator`; nothing here knows FastAPI. Errors are
typed (``headwater.groups.errors``); the app's one handler turns them into responses.

Concurrency, for the whole service (the other modules rely on it and do not restate it):

- **One asyncio event loop per process, no threads.** Routes, the expiry sweeper, the lag
  gauges and the change listener are coroutines on it, and nothing blocks it while it serves:
  Redis and the brokers are reached through async clients (a private redis-server is started
  in a thread before the app serves, and stopped after).
- **No group state in memory: Redis arbitrates.** Every change is one atomic Redis step -- a
  group transaction (WATCH/MULTI, rerun on fresh state when another process changed the group
  first; ``store.groups``) or a Lua script (offset commits, ``store.offsets``; steady-state
  heartbeats, ``store.liveness``) -- so any number of coordinator processes serve the same
  groups, and every process runs the sweeper.
- **Within a process, one lock per group, and batching.** A group's transactions take its
  asyncio lock; the requests that queued meanwhile run together as one batch in one
  transaction (``store.batch``). Fast heartbeats and commits take no lock.
- **Caches only decide when a change is noticed.** Topic metadata (``metadata``) and the
  subscriptions this process last saw may lag by a refresh; ownership is always decided from
  the state read in the transaction.
- **Parked heartbeats wait on events**, set through Redis pub/sub by whichever process made the
  change (``store.changes``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from headwater.errors import InvalidRequestError
from headwater.groups.errors import (
    BrokersUnavailableError,
    GroupNotEmptyError,
    GroupNotFoundError,
    InvalidCommitOffsetError,
    InvalidGroupIdError,
    InvalidResetError,
    InvalidTimeoutError,
    InvalidTopicNameError,
    StoreUnavailableError,
    UnknownTopicOrPartitionError,
    UnsupportedAssignorError,
)
from headwater.topic_partition import PartitionKey
from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator import metrics, names
from headwater_coordinator.assignor import ASSIGNORS
from headwater_coordinator.group import GroupState, HeartbeatRequest, HeartbeatResult
from headwater_coordinator.member import JOIN_EPOCH, LEAVE_EPOCH
from headwater_coordinator.metadata import BrokerMetadata
from headwater_coordinator.store.batch import Finish
from headwater_coordinator.store.changes import GroupChanges
from headwater_coordinator.store.groups import GroupStore
from headwater_coordinator.store.liveness import FastHeartbeat, Liveness
from headwater_coordinator.store.offsets import CommittedOffset, OffsetStore, PartitionOffset
from headwater_kernel.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("headwater.coordinator")

MIN_TIMEOUT_MS = 100
MAX_SESSION_TIMEOUT_MS = 1_800_000
MAX_REBALANCE_TIMEOUT_MS = 3_600_000
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000
# A member that is still reconciling comes back sooner than the regular interval, so a partition
# freed by its old owner reaches the new one quickly.
RECONCILING_HEARTBEAT_MS = 100
MAX_WAIT_MS = 30_000
WAKE_COALESCE_S = 0.01
# Sweeps by any process normally come every sweep interval; a longer pause than this (and at
# least MIN_GAP_MS) means no coordinator kept the expiry clock: a gap, see Coordinator.sweep.
GAP_SWEEPS = 4
MIN_GAP_MS = 2_000

ResetStrategy = Literal["earliest", "latest", "timestamp", "explicit"]


@dataclass(frozen=True)
class HeartbeatAnswer:
    """What a heartbeat tells the member: its id and epoch, when to come back, what it owns."""

    member_id: str
    member_epoch: MemberEpoch
    heartbeat_interval_ms: int
    assignment: Collection[PartitionKey]


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: PartitionId
    member_id: str | None
    committed_offset: Offset | None
    end_offset: Offset
    lag: int


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    total_lag: int
    partitions: list[PartitionLag]


class Coordinator:
    """Consumer groups (membership, assignment, expiry) and their committed offsets."""

    def __init__(
        self,
        *,
        group_store: GroupStore,
        offset_store: OffsetStore,
        liveness: Liveness,
        metadata: BrokerMetadata,
        changes: GroupChanges | None = None,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        sweep_interval_ms: int = 500,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.group_store = group_store
        self.offset_store = offset_store
        self.liveness = liveness
        self.metadata = metadata
        self.changes = changes
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.sweep_interval_ms = sweep_interval_ms
        self.gap_ms = max(MIN_GAP_MS, GAP_SWEEPS * sweep_interval_ms)
        # When this process's sweeper last kept the expiry clock (monotonic s); see `expiring`.
        self._kept_clock_at: float | None = None
        self._store_lost = False
        # Set when this process starts shutting down (stop_expiring): it expires no one again.
        self._stopped = False
        # Topics each group subscribes to, as last seen by this process's full heartbeats; the
        # fast path compares their current sizes with the group's (an unknown group goes full).
        self._subscriptions: dict[str, frozenset[str]] = {}

    @property
    def expiring(self) -> bool:
        """Whether heartbeats may expire other members: only while this process's sweeper keeps
        the expiry clock, so that any grace owed for a gap (``sweep``) is given first -- at
        start-up, and after losing Redis for longer than a gap."""
        if self._kept_clock_at is None or self._stopped:
            return False
        return self.clock.monotonic() - self._kept_clock_at < self.gap_ms / 1000

    def stop_expiring(self) -> None:
        """Expire no member from now on: this process is shutting down.

        Called on SIGTERM while the process still answers heartbeats. Once it stops answering,
        its members cannot heartbeat to it, so expiring them by its clock would punish them for
        its own shutdown; another coordinator process keeps the expiry clock, or, with none, the
        next one to start sees the gap and gives every member a full session (``sweep``).
        """
        self._stopped = True

    # --- validation ----------------------------------------------------------------------------

    @staticmethod
    def _check_group_id(group_id: str) -> None:
        if not names.is_valid(group_id):
            raise InvalidGroupIdError(names.describe("group id", group_id))

    @staticmethod
    def _check_topics(topics: Iterable[str]) -> None:
        """Kafka's topic name rule, checked before anything reads or changes state."""
        for topic in topics:
            if not names.is_valid(topic):
                raise InvalidTopicNameError(names.describe("topic name", topic))

    @staticmethod
    def _check_request(request: HeartbeatRequest) -> None:
        session, rebalance = request.session_timeout_ms, request.rebalance_timeout_ms
        if not MIN_TIMEOUT_MS <= session <= MAX_SESSION_TIMEOUT_MS:
            raise InvalidTimeoutError(
                f"session_timeout_ms {session} is outside [{MIN_TIMEOUT_MS}, "
                f"{MAX_SESSION_TIMEOUT_MS}]"
            )
        if not MIN_TIMEOUT_MS <= rebalance <= MAX_REBALANCE_TIMEOUT_MS:
            raise InvalidTimeoutError(
                f"rebalance_timeout_ms {rebalance} is outside [{MIN_TIMEOUT_MS}, "
                f"{MAX_REBALANCE_TIMEOUT_MS}]"
            )
        if request.assignor is not None and request.assignor not in ASSIGNORS:
            raise UnsupportedAssignorError(
                f"assignor {request.assignor!r} is not one of {sorted(ASSIGNORS)}"
            )
        if request.member_epoch < -2:
            raise InvalidRequestError(f"member_epoch {request.member_epoch} is not valid")
        if request.member_epoch == JOIN_EPOCH and request.topics is None:
            raise InvalidRequestError("joining (member_epoch 0) needs topics")
        if request.member_epoch != JOIN_EPOCH and not request.member_id:
            raise InvalidRequestError("member_id is required unless joining")
        Coordinator._check_topics(request.topics or ())
        Coordinator._check_topics(tp.topic for tp in request.owned or ())

    async def _sizes(self, state: GroupState, extra: Iterable[str]) -> dict[str, int]:
        """Partition counts of every subscribed topic; the last known ones if brokers are down."""
        wanted = state.subscribed_topics | set(extra)
        try:
            return await self.metadata.partition_counts(wanted)
        except BrokersUnavailableError as exc:
            log.warning("keeping last known topic metadata for %s: %s", state.group_id, exc)
            return dict(state.topics)

    # --- membership ----------------------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        *,
        member_id: str | None,
        member_epoch: int,
        instance_id: str | None = None,
        topics: Collection[str] | None = None,
        owned: Collection[PartitionKey] | None = None,
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
        wait_ms: int = 0,
    ) -> HeartbeatAnswer:
        """Join (epoch 0), heartbeat (reconciling toward the target) or leave (-1, static -2),
        in one atomic step.

        Timeouts left out (or 0) take the coordinator's session timeout and the default
        rebalance timeout. With ``wait_ms``, an answer that would tell the member nothing new
        (same epoch, same partitions as it reported owning) is held until the group changes or
        the wait ends, so members hear of a rebalance at once instead of at their next heartbeat.
        """
        self._check_group_id(group_id)
        request = HeartbeatRequest(
            member_id=member_id,
            member_epoch=MemberEpoch(member_epoch),
            instance_id=instance_id,
            topics=frozenset(topics) if topics is not None else None,
            owned=set(owned) if owned is not None else None,
            session_timeout_ms=session_timeout_ms or self.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms or DEFAULT_REBALANCE_TIMEOUT_MS,
            assignor=assignor,
        )
        self._check_request(request)
        if not 0 <= wait_ms <= MAX_WAIT_MS:
            raise InvalidTimeoutError(f"wait_ms {wait_ms} is outside [0, {MAX_WAIT_MS}]")
        deadline = self.clock.monotonic() + min(wait_ms, request.session_timeout_ms // 2) / 1000
        while True:
            change = None
            if self.changes is not None and request.member_id is not None:
                change = self.changes.watch(group_id, request.member_id)
            answer = await self._heartbeat_once(group_id, request)
            remaining = deadline - self.clock.monotonic()
            news = answer.member_epoch != request.member_epoch or request.owned != set(
                answer.assignment
            )
            if news or remaining <= 0 or change is None:
                return answer
            if not await GroupChanges.wait(change, remaining):
                return answer
            # Changes come in bursts (a join moves many members); let one settle first.
            await asyncio.sleep(WAKE_COALESCE_S)

    async def _heartbeat_once(self, group_id: str, request: HeartbeatRequest) -> HeartbeatAnswer:
        fast = await self._fast_heartbeat(group_id, request)
        if fast is not None:
            metrics.HEARTBEATS.inc()
            return fast

        async def operation(state: GroupState) -> Finish:
            now = self.clock.now_ms()
            fenced = request.member_id is not None and request.member_id not in state.members
            if fenced and request.member_epoch != JOIN_EPOCH:
                fenced = await self.group_store.is_fenced(group_id, request.member_id)
            admitted = state.admit(request, now, fenced)

            async def finish() -> HeartbeatResult:
                # Sizes of every topic subscribed once the whole batch is admitted.
                sizes = await self._sizes(state, request.topics or ())
                if isinstance(admitted, HeartbeatResult):
                    state.after_leave(admitted, now, sizes, expire=self.expiring)
                    return admitted
                return state.settle(admitted, request, now, sizes, expire=self.expiring)

            return finish

        applied = await self.group_store.transact_phased(group_id, operation)
        result, state = cast(HeartbeatResult, applied.result), applied.state
        self._subscriptions[group_id] = frozenset(state.subscribed_topics)
        self._observe(state, joined=request.member_epoch == JOIN_EPOCH)
        interval = self.heartbeat_interval_ms
        if result.reconciling:
            interval = min(interval, RECONCILING_HEARTBEAT_MS)
        return HeartbeatAnswer(result.member_id, result.member_epoch, interval, result.assignment)

    async def _fast_heartbeat(
        self, group_id: str, request: HeartbeatRequest
    ) -> HeartbeatAnswer | None:
        """The steady-state path: a stable member reporting nothing new (``store.liveness``)."""
        subscribed = self._subscriptions.get(group_id)
        if request.member_epoch <= 0 or request.member_id is None or subscribed is None:
            return None
        try:
            sizes = await self.metadata.partition_counts(subscribed)
        except BrokersUnavailableError:
            return None
        member = await self.liveness.fast_heartbeat(
            FastHeartbeat(
                group_id=group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                now_ms=self.clock.now_ms(),
                owned=request.owned,
                topics=request.topics,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                instance_id=request.instance_id,
                sizes={t: n for t, n in sizes.items() if n > 0},
            )
        )
        if member is None:
            return None
        return HeartbeatAnswer(
            member.member_id, member.epoch, self.heartbeat_interval_ms, member.assigned
        )

    def _observe(self, state: GroupState, joined: bool = False) -> None:
        metrics.HEARTBEATS.inc()
        if joined:
            metrics.JOINS.inc()
        if state.observed:  # the batch's other requests counted its group-wide changes
            return
        state.observed = True
        if state.expired:
            metrics.EXPIRATIONS.inc(len(state.expired))
        if state.rebalances:
            metrics.REBALANCES.inc(state.rebalances)
        metrics.GROUP_MEMBERS.labels(state.group_id).set(len(state.members))

    async def sweep(self, now: int | None = None) -> int:
        """Expire members past their deadline in every group; returns how many were expired.

        Each member is expired by its own deadline, from the first sweep on. The one exception
        is a gap: deadlines that fell while no coordinator kept the expiry clock (none ran, or
        none reached Redis -- a sweep by any process is that clock's tick) are re-armed, since
        those members could not heartbeat (``GroupState.rearm``).
        """
        now = self.clock.now_ms() if now is None else now
        if self._stopped:
            return 0
        await self._close_gap(now)
        expired = 0
        for group_id in await self.liveness.due_groups(now):

            async def operation(state: GroupState) -> None:
                # Checked again where the expiry happens: the shutdown may begin mid-sweep.
                if not self._stopped and state.expire(now):
                    state.refresh_topics(await self._sizes(state, ()))
                    state.compute_target()

            state = (await self.group_store.transact(group_id, operation)).state
            expired += len(state.expired)
            if state.expired:
                log.info("group %s: expired %s", group_id, state.expired)
                metrics.EXPIRATIONS.inc(len(state.expired))
                metrics.REBALANCES.inc(state.rebalances)
            # Entries of members that are gone (group deleted, member replaced) are dropped here.
            await self.liveness.prune_deadlines(group_id, now, state.members)
        return expired

    async def _close_gap(self, now: int) -> None:
        """Re-arm the deadlines that fell since the last sweep, if that was a gap ago; then
        record this sweep. In that order: a process that starts meanwhile still sees the gap
        and re-arms too (harmless), rather than expiring members not yet re-armed."""
        last = await self.liveness.last_sweep()
        if last is None or now - last > self.gap_ms:
            since = 0 if last is None else last
            rearmed = 0
            for group_id in await self.liveness.groups_due_between(since, now):

                async def operation(state: GroupState) -> list[str]:
                    return state.rearm(since, now)

                rearmed += len((await self.group_store.transact(group_id, operation)).result)
            if rearmed:
                log.info(
                    "no coordinator kept the expiry clock for %s: %d members whose session "
                    "ended meanwhile get a full session from now",
                    "ever" if last is None else f"{now - last} ms",
                    rearmed,
                )
        await self.liveness.record_sweep(now)
        self._kept_clock_at = self.clock.monotonic()

    async def run_sweeper(self) -> None:
        """Sweep until :meth:`stop_expiring` (every coordinator process runs one; Redis
        arbitrates)."""
        while not self._stopped:
            try:
                await self.sweep()
                if self._store_lost:
                    self._store_lost = False
                    log.warning("Redis answers again; expiring members resumes")
            except asyncio.CancelledError:
                raise
            except StoreUnavailableError as exc:
                if not self._store_lost:  # once per outage, not every sweep
                    self._store_lost = True
                    log.warning("Redis does not answer, expiring waits for it: %s", exc.__cause__)
            except Exception:
                log.exception("expiry sweep failed")
            await self.clock.sleep(self.sweep_interval_ms / 1000)

    # --- offsets -------------------------------------------------------------------------------

    async def _check_offsets(self, entries: Sequence[PartitionOffset]) -> None:
        """Reject negative offsets, unknown partitions and offsets beyond the log end."""
        for e in entries:
            if e.offset < 0 or e.partition < 0:
                raise InvalidCommitOffsetError(
                    f"{e.topic}/{e.partition}: offset {e.offset} and partition must not be negative"
                )
        for e in entries:
            info = await self.metadata.require(e.topic, e.partition)
            if e.offset > info.end[e.partition]:
                # The cache may be behind the log; only a fresh answer can reject the commit.
                info = await self.metadata.require(e.topic, e.partition, fresh=True)
                if e.offset > info.end[e.partition]:
                    raise InvalidCommitOffsetError(
                        f"{e.topic}/{e.partition}: offset {e.offset} is beyond the log end "
                        f"{info.end[e.partition]}"
                    )

    async def commit(
        self,
        group_id: str,
        offsets: Sequence[PartitionOffset],
        *,
        member_id: str | None,
        member_epoch: int,
    ) -> None:
        """Store offsets from the partitions' current owner, or for a group without members
        (no ``member_id``, epoch -1). Offsets for topics or partitions the brokers do not know
        are refused (40403), so nothing is stored under a name no topic has."""
        self._check_group_id(group_id)
        self._check_topics(o.topic for o in offsets)
        if member_id is None and member_epoch != LEAVE_EPOCH:
            raise InvalidRequestError("member_epoch needs a member_id")
        await self._check_offsets(offsets)
        await self.offset_store.commit(
            group_id,
            offsets,
            member_id=member_id,
            member_epoch=MemberEpoch(member_epoch),
            now_ms=self.clock.now_ms(),
        )
        metrics.OFFSET_COMMITS.inc(len(offsets))

    async def offsets(self, group_id: str) -> list[CommittedOffset]:
        """The group's committed offsets, sorted by topic and partition."""
        self._check_group_id(group_id)
        if not await self.group_store.exists(group_id):
            raise GroupNotFoundError(f"group {group_id} not found")
        return await self.offset_store.committed(group_id)

    async def reset(
        self,
        group_id: str,
        strategy: ResetStrategy,
        *,
        topics: Sequence[str] = (),
        timestamp: int | None = None,
        offsets: Sequence[PartitionOffset] = (),
    ) -> list[CommittedOffset]:
        """Set committed offsets of a group without members; returns all its offsets.

        ``earliest`` / ``latest`` / ``timestamp`` apply to every partition of ``topics``;
        ``explicit`` sets exactly ``offsets``. Topics the brokers do not know are refused (40403).
        """
        self._check_group_id(group_id)
        self._check_topics([*topics, *(o.topic for o in offsets)])
        state = await self.group_store.load(group_id)
        if state.members:
            raise GroupNotEmptyError(
                f"group {group_id} has {len(state.members)} members; stop them before a reset"
            )
        targets: list[PartitionOffset] = []
        if strategy == "explicit":
            if not offsets:
                raise InvalidResetError("strategy explicit needs offsets")
            await self._check_offsets(offsets)
            targets = list(offsets)
        else:
            if not topics:
                raise InvalidResetError(f"strategy {strategy} needs topics")
            if strategy == "timestamp" and timestamp is None:
                raise InvalidResetError("strategy timestamp needs timestamp")
            for topic in topics:
                info = await self.metadata.topic(topic, fresh=True)
                if info is None:
                    raise UnknownTopicOrPartitionError(f"topic {topic} does not exist")
                for index in range(info.partitions):
                    partition = PartitionId(index)
                    end = info.require_end(partition)
                    if strategy == "earliest":
                        offset = info.beginning[partition]
                    elif strategy == "latest":
                        offset = end
                    else:
                        assert timestamp is not None
                        found = await self.metadata.offset_for_time(topic, partition, timestamp)
                        offset = end if found is None else found
                    targets.append(PartitionOffset(topic, partition, offset))
        await self.offset_store.replace(group_id, targets, self.clock.now_ms())
        return await self.offset_store.committed(group_id)

    # --- admin ---------------------------------------------------------------------------------

    async def _existing(self, group_id: str) -> GroupState:
        """The group's state; GroupNotFoundError unless it has state or committed offsets."""
        self._check_group_id(group_id)
        state = await self.group_store.load(group_id)
        if not state.exists and not await self.group_store.exists(group_id):
            raise GroupNotFoundError(f"group {group_id} not found")
        return state

    async def describe(self, group_id: str) -> GroupState:
        """State, epochs, members and assignment of a group."""
        return await self._existing(group_id)

    async def group_ids(self) -> list[str]:
        """Ids of every group that exists, sorted."""
        return await self.group_store.group_ids()

    async def list_groups(self) -> list[GroupState]:
        """Every group that exists, sorted by id."""
        return [await self.group_store.load(g) for g in await self.group_store.group_ids()]

    async def lag(self, group_id: str, *, fresh: bool = True) -> GroupLag:
        """Committed offset vs. log end for every partition subscribed to or committed.

        ``fresh=False`` accepts end offsets from the metadata cache (the lag gauges' refresh).
        """
        state = await self._existing(group_id)
        committed = {
            (c.topic, c.partition): c.offset for c in await self.offset_store.committed(group_id)
        }
        owners = state.owners()
        # Offsets stored under a name no topic can have (before names were checked) are left out.
        named = state.subscribed_topics | {t for t, _ in committed}
        topics = sorted(t for t in named if names.is_valid(t))
        rows = []
        for topic in topics:
            info = await self.metadata.topic(topic, fresh=fresh)
            if info is None:
                continue
            # A partition without a leader has no known end now: left out until it has one.
            for partition, end in sorted(info.end.items()):
                offset = committed.get((topic, partition))
                base = info.beginning[partition] if offset is None else offset
                rows.append(
                    PartitionLag(
                        topic=topic,
                        partition=partition,
                        member_id=owners.get(PartitionKey(topic, partition)),
                        committed_offset=offset,
                        end_offset=end,
                        lag=max(0, end - base),
                    )
                )
        return GroupLag(group_id=group_id, total_lag=sum(r.lag for r in rows), partitions=rows)

    async def delete(self, group_id: str) -> None:
        """Delete a group without members, with its offsets."""
        self._check_group_id(group_id)
        await self.group_store.delete(group_id)
