"""The coordinator's operations: what each route asks of groups, offsets and the brokers.

Stateless: every operation reads and writes Redis through :class:`GroupStore` (one atomic
transaction per change), so any number of coordinator processes can serve the same groups.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable
from typing import cast

from headwater.errors import InvalidRequestError
from headwater.groups.errors import (
    BrokersUnavailableError,
    GroupNotEmptyError,
    GroupNotFoundError,
    InvalidCommitOffsetError,
    InvalidGroupIdError,
    InvalidResetError,
    InvalidTimeoutError,
    UnsupportedAssignorError,
)
from headwater.types import MemberEpoch, Offset, PartitionId
from headwater_coordinator import metrics
from headwater_coordinator.assignor import ASSIGNORS, TopicPartition
from headwater_coordinator.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    GroupState,
    HeartbeatRequest,
    HeartbeatResult,
    encode_partitions,
)
from headwater_coordinator.metadata import BrokerMetadata
from headwater_coordinator.models import (
    CommitBody,
    CommittedOffsetModel,
    GroupDescription,
    GroupLag,
    GroupOffsets,
    GroupSummary,
    HeartbeatBody,
    HeartbeatResponse,
    MemberDescription,
    PartitionLag,
    ResetBody,
    TopicPartitions,
)
from headwater_coordinator.store import Finish, GroupChanges, GroupStore

log = logging.getLogger("headwater.coordinator")

GROUP_ID = re.compile(r"[A-Za-z0-9._-]{1,249}")
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
MIN_TIMEOUT_MS = 100
MAX_SESSION_TIMEOUT_MS = 1_800_000
MAX_REBALANCE_TIMEOUT_MS = 3_600_000
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000
# A member that is still reconciling comes back sooner than the regular interval, so a partition
# freed by its old owner reaches the new one quickly.
RECONCILING_HEARTBEAT_MS = 100
MAX_WAIT_MS = 30_000
WAKE_COALESCE_S = 0.01


def now_ms() -> int:
    return int(time.time() * 1000)


def as_topic_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartitions]:
    return [TopicPartitions(topic=t, partitions=ps) for t, ps in encode_partitions(tps).items()]


class Coordinator:
    """Consumer groups (membership, assignment, expiry) and their committed offsets."""

    def __init__(
        self,
        store: GroupStore,
        metadata: BrokerMetadata,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        changes: GroupChanges | None = None,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.changes = changes
        # Start-up grace: while no coordinator ran, members could not heartbeat, so deadlines
        # that passed meanwhile mean nothing. Like Kafka re-arming session timers when a
        # coordinator loads a group, this process expires no one for one session timeout; a
        # peer process that stayed up keeps expiring as usual.
        self._expire_from = time.monotonic() + session_timeout_ms / 1000
        # Topics each group subscribes to, as last seen by this process's full heartbeats; the
        # fast path compares their current sizes with the group's (an unknown group goes full).
        self._subscriptions: dict[str, frozenset[str]] = {}

    @property
    def expiring(self) -> bool:
        return time.monotonic() >= self._expire_from

    # --- validation ----------------------------------------------------------------------------

    @staticmethod
    def _check_group_id(group_id: str) -> None:
        if not GROUP_ID.fullmatch(group_id):
            raise InvalidGroupIdError(
                f"group id {group_id!r} must be 1-249 characters of [A-Za-z0-9._-]"
            )

    def _request(self, body: HeartbeatBody) -> HeartbeatRequest:
        session = body.session_timeout_ms or self.session_timeout_ms
        rebalance = body.rebalance_timeout_ms or DEFAULT_REBALANCE_TIMEOUT_MS
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
        if body.assignor is not None and body.assignor not in ASSIGNORS:
            raise UnsupportedAssignorError(
                f"assignor {body.assignor!r} is not one of {sorted(ASSIGNORS)}"
            )
        if body.member_epoch < -2:
            raise InvalidRequestError(f"member_epoch {body.member_epoch} is not valid")
        if body.member_epoch == JOIN_EPOCH and body.topics is None:
            raise InvalidRequestError("joining (member_epoch 0) needs topics")
        if body.member_epoch != JOIN_EPOCH and not body.member_id:
            raise InvalidRequestError("member_id is required unless joining")
        for topic in body.topics or ():
            if not TOPIC.fullmatch(topic):
                raise InvalidRequestError(f"topic name {topic!r} is not valid")
        owned = None
        if body.owned is not None:
            owned = {(o.topic, PartitionId(p)) for o in body.owned for p in o.partitions}
        return HeartbeatRequest(
            member_id=body.member_id,
            member_epoch=MemberEpoch(body.member_epoch),
            instance_id=body.instance_id,
            topics=frozenset(body.topics) if body.topics is not None else None,
            owned=owned,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            assignor=body.assignor,
        )

    async def _sizes(self, state: GroupState, extra: Iterable[str]) -> dict[str, int]:
        """Partition counts of every subscribed topic; the last known ones if brokers are down."""
        wanted = state.subscribed_topics | set(extra)
        try:
            return await self.metadata.partition_counts(wanted)
        except BrokersUnavailableError as exc:
            log.warning("keeping last known topic metadata for %s: %s", state.group_id, exc)
            return dict(state.topics)

    # --- membership ----------------------------------------------------------------------------

    async def heartbeat(self, group_id: str, body: HeartbeatBody) -> HeartbeatResponse:
        """Join, heartbeat (reconciling toward the target) or leave, in one atomic step.

        With ``wait_ms``, an answer that would tell the member nothing new (same epoch, same
        partitions as it reported owning) is held until the group changes or the wait ends, so
        members hear of a rebalance at once instead of at their next heartbeat.
        """
        self._check_group_id(group_id)
        request = self._request(body)
        if not 0 <= body.wait_ms <= MAX_WAIT_MS:
            raise InvalidTimeoutError(f"wait_ms {body.wait_ms} is outside [0, {MAX_WAIT_MS}]")
        deadline = time.monotonic() + min(body.wait_ms, request.session_timeout_ms // 2) / 1000
        while True:
            change = None
            if self.changes is not None and request.member_id is not None:
                change = self.changes.watch(group_id, request.member_id)
            response = await self._heartbeat_once(group_id, request)
            remaining = deadline - time.monotonic()
            news = response.member_epoch != request.member_epoch or request.owned != {
                (a.topic, PartitionId(p)) for a in response.assignment for p in a.partitions
            }
            if news or remaining <= 0 or change is None:
                return response
            if not await GroupChanges.wait(change, remaining):
                return response
            # Changes come in bursts (a join moves many members); let one settle first.
            await asyncio.sleep(WAKE_COALESCE_S)

    async def _heartbeat_once(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResponse:
        fast = await self._fast_heartbeat(group_id, request)
        if fast is not None:
            metrics.HEARTBEATS.inc()
            return fast

        async def operation(state: GroupState) -> Finish:
            now = now_ms()
            fenced = request.member_id is not None and request.member_id not in state.members
            if fenced and request.member_epoch != JOIN_EPOCH:
                fenced = await self.store.is_fenced(group_id, request.member_id)
            admitted = state.admit(request, now, fenced)

            async def finish() -> HeartbeatResult:
                # Sizes of every topic subscribed once the whole batch is admitted.
                sizes = await self._sizes(state, request.topics or ())
                if isinstance(admitted, HeartbeatResult):
                    state.after_leave(admitted, now, sizes, expire=self.expiring)
                    return admitted
                return state.settle(admitted, request, now, sizes, expire=self.expiring)

            return finish

        answer, state = await self.store.transact_phased(group_id, operation)
        result = cast(HeartbeatResult, answer)
        self._subscriptions[group_id] = frozenset(state.subscribed_topics)
        self._observe(state, joined=request.member_epoch == JOIN_EPOCH)
        interval = self.heartbeat_interval_ms
        if result.reconciling:
            interval = min(interval, RECONCILING_HEARTBEAT_MS)
        return HeartbeatResponse(
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=as_topic_partitions(result.assignment),
        )

    async def _fast_heartbeat(
        self, group_id: str, request: HeartbeatRequest
    ) -> HeartbeatResponse | None:
        """The steady-state path: a stable member reporting nothing new (see the store)."""
        subscribed = self._subscriptions.get(group_id)
        if request.member_epoch <= 0 or request.member_id is None or subscribed is None:
            return None
        try:
            sizes = await self.metadata.partition_counts(subscribed)
        except BrokersUnavailableError:
            return None
        member = await self.store.fast_heartbeat(
            group_id,
            request.member_id,
            request.member_epoch,
            now_ms(),
            request.owned,
            request.topics,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.instance_id,
            {t: n for t, n in sizes.items() if n > 0},
        )
        if member is None:
            return None
        return HeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=as_topic_partitions(member.assigned),
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

    async def sweep(self) -> int:
        """Expire members past their deadline in every group; returns how many were expired."""
        if not self.expiring:
            return 0
        now = now_ms()
        expired = 0
        for group_id in await self.store.due_groups(now):

            async def operation(state: GroupState) -> None:
                if state.expire(now):
                    state.refresh_topics(await self._sizes(state, ()))
                    state.compute_target()

            _, state = await self.store.transact(group_id, operation)
            expired += len(state.expired)
            if state.expired:
                log.info("group %s: expired %s", group_id, state.expired)
                metrics.EXPIRATIONS.inc(len(state.expired))
                metrics.REBALANCES.inc(state.rebalances)
            # Entries of members that are gone (group deleted, member replaced) are dropped here.
            await self.store.prune_deadlines(group_id, now, state.members)
        return expired

    async def run_sweeper(self, interval_s: float) -> None:
        """Sweep forever (every coordinator process runs one; Redis arbitrates)."""
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("expiry sweep failed")
            await asyncio.sleep(interval_s)

    # --- offsets -------------------------------------------------------------------------------

    async def _check_offsets(self, entries: list[tuple[str, PartitionId, Offset]]) -> None:
        """Reject negative offsets, unknown partitions and offsets beyond the log end."""
        for topic, partition, offset in entries:
            if offset < 0 or partition < 0:
                raise InvalidCommitOffsetError(
                    f"{topic}/{partition}: offset {offset} and partition must not be negative"
                )
        for topic, partition, offset in entries:
            info = await self.metadata.require(topic, partition)
            if offset > info.end[partition]:
                # The cache may be behind the log; only a fresh answer can reject the commit.
                info = await self.metadata.require(topic, partition, fresh=True)
                if offset > info.end[partition]:
                    raise InvalidCommitOffsetError(
                        f"{topic}/{partition}: offset {offset} is beyond the log end "
                        f"{info.end[partition]}"
                    )

    async def commit(self, group_id: str, body: CommitBody) -> None:
        """Store offsets from the partitions' current owner (or for a group without members)."""
        self._check_group_id(group_id)
        entries = [(o.topic, PartitionId(o.partition), Offset(o.offset)) for o in body.offsets]
        await self._check_offsets(entries)
        if body.member_id is None and body.member_epoch != LEAVE_EPOCH:
            raise InvalidRequestError("member_epoch needs a member_id")
        await self.store.commit(
            group_id,
            body.member_id,
            MemberEpoch(body.member_epoch),
            [
                (o.topic, PartitionId(o.partition), Offset(o.offset), o.metadata)
                for o in body.offsets
            ],
            now_ms(),
        )
        metrics.OFFSET_COMMITS.inc(len(body.offsets))

    async def offsets(self, group_id: str) -> GroupOffsets:
        self._check_group_id(group_id)
        if not await self.store.exists(group_id):
            raise GroupNotFoundError(f"group {group_id} not found")
        committed = await self.store.committed(group_id)
        return GroupOffsets(
            group_id=group_id,
            offsets=[
                CommittedOffsetModel(
                    topic=c.topic,
                    partition=c.partition,
                    offset=c.offset,
                    metadata=c.metadata,
                    commit_timestamp=c.commit_timestamp,
                )
                for c in committed
            ],
        )

    async def reset(self, group_id: str, body: ResetBody) -> GroupOffsets:
        """Set committed offsets of a group without members (earliest/latest/timestamp/explicit)."""
        self._check_group_id(group_id)
        state = await self.store.load(group_id)
        if state.members:
            raise GroupNotEmptyError(
                f"group {group_id} has {len(state.members)} members; stop them before a reset"
            )
        targets: list[tuple[str, PartitionId, Offset]] = []
        if body.strategy == "explicit":
            if not body.offsets:
                raise InvalidResetError("strategy explicit needs offsets")
            entries = [(o.topic, PartitionId(o.partition), Offset(o.offset)) for o in body.offsets]
            await self._check_offsets(entries)
            targets = entries
        else:
            if not body.topics:
                raise InvalidResetError(f"strategy {body.strategy} needs topics")
            if body.strategy == "timestamp" and body.timestamp is None:
                raise InvalidResetError("strategy timestamp needs timestamp")
            for topic in body.topics:
                info = await self.metadata.topic(topic, fresh=True)
                if info is None:
                    raise InvalidResetError(f"topic {topic} does not exist")
                for partition, end in sorted(info.end.items()):
                    if body.strategy == "earliest":
                        offset = info.beginning[partition]
                    elif body.strategy == "latest":
                        offset = end
                    else:
                        assert body.timestamp is not None
                        found = await self.metadata.offset_for_time(
                            topic, partition, body.timestamp
                        )
                        offset = end if found is None else found
                    targets.append((topic, partition, offset))
        await self.store.replace_offsets(group_id, targets, now_ms())
        return await self.offsets(group_id)

    # --- admin ---------------------------------------------------------------------------------

    async def describe(self, group_id: str) -> GroupDescription:
        self._check_group_id(group_id)
        state = await self.store.load(group_id)
        if not state.exists and not await self.store.exists(group_id):
            raise GroupNotFoundError(f"group {group_id} not found")
        members = [
            MemberDescription(
                member_id=m.member_id,
                instance_id=m.instance_id,
                member_epoch=m.epoch,
                topics=sorted(m.topics),
                assignment=as_topic_partitions(m.assigned),
                revoking=as_topic_partitions(m.revoking),
                target=as_topic_partitions(m.target),
                session_timeout_ms=m.session_timeout_ms,
                last_heartbeat_ms=m.last_heartbeat_ms,
            )
            for m in sorted(state.members.values(), key=lambda m: m.member_id)
        ]
        return GroupDescription(
            group_id=group_id,
            state=state.status,
            epoch=state.epoch,
            assignment_epoch=state.assignment_epoch,
            assignor=state.assignor,
            topics=state.topics,
            members=members,
        )

    async def list_groups(self) -> list[GroupSummary]:
        out = []
        for group_id in await self.store.list_groups():
            state = await self.store.load(group_id)
            out.append(
                GroupSummary(
                    group_id=group_id,
                    state=state.status,
                    epoch=state.epoch,
                    members=len(state.members),
                )
            )
        return out

    async def lag(self, group_id: str, *, fresh: bool = True) -> GroupLag:
        """Committed offset vs. log end for every partition subscribed to or committed.

        ``fresh=False`` accepts end offsets from the metadata cache (the lag gauges' refresh).
        """
        self._check_group_id(group_id)
        state = await self.store.load(group_id)
        if not state.exists and not await self.store.exists(group_id):
            raise GroupNotFoundError(f"group {group_id} not found")
        committed = {(c.topic, c.partition): c.offset for c in await self.store.committed(group_id)}
        owners = state.owners()
        topics = sorted(state.subscribed_topics | {t for t, _ in committed})
        rows = []
        for topic in topics:
            info = await self.metadata.topic(topic, fresh=fresh)
            if info is None:
                continue
            for partition, end in sorted(info.end.items()):
                offset = committed.get((topic, partition))
                base = info.beginning[partition] if offset is None else offset
                rows.append(
                    PartitionLag(
                        topic=topic,
                        partition=partition,
                        member_id=owners.get((topic, partition)),
                        committed_offset=offset,
                        end_offset=end,
                        lag=max(0, end - base),
                    )
                )
        return GroupLag(group_id=group_id, total_lag=sum(r.lag for r in rows), partitions=rows)

    async def delete(self, group_id: str) -> None:
        self._check_group_id(group_id)
        await self.store.delete(group_id)
