"""The leader's side of replication for one partition: fetches, in-sync set, high watermark.

A :class:`PartitionLeader` exists while this broker leads a partition in one leader epoch; a new
epoch (or losing leadership) retires it (:meth:`PartitionLeader.resign`) and the broker's roles
make another. It answers follower fetches (:meth:`handle_fetch`; :func:`serve_fetch` for a
whole long-polling request), keeps each follower's fetch state, computes the high watermark and
proposes in-sync set changes as data (:meth:`isr_proposal`: the controller's own
``IsrProposal``, for the cluster layer to send to ``POST /cluster/controller/isr``). Rules,
with Kafka's names where they come from:

- A fetch whose leader epoch is older than ours is refused with 40904 (FENCED_LEADER_EPOCH), a
  newer one with 40905 (UNKNOWN_LEADER_EPOCH); one from an older incarnation of the follower
  (broker epoch below what it fetched with before) with 40907.
- Divergence (KIP-320): ``end = epochs.end_offset_for(last_fetched_epoch)``; when that epoch is
  not ours up to the follower's fetch offset (``end.epoch < last_fetched_epoch`` or
  ``end.end_offset < fetch_offset``) the answer is ``diverging: end`` and no records.
- Fetch state (``Replica.updateFetchState``): a follower whose fetch offset reaches the leader's
  log end is caught up now; one reaching the log end of its previous fetch was caught up then.
- The in-sync set shrinks by followers not caught up for ``replica.lag.time.max.ms`` and grows by
  a replica whose log end reaches the high watermark and this epoch's start offset (KIP-903: the
  proposal names the broker epoch each member fetched with).
- High watermark (``maybeIncrementLeaderHW``): the lowest log end over the maximal in-sync set --
  the committed set together with a pending proposal's -- and over replicas caught up and about to
  join, the leader's own local end included; it only moves up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from headwater.errors import (
    BrokerError,
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    UnknownLeaderEpochError,
)
from headwater.records.batch import BatchHeader
from headwater.types import BrokerId
from headwater_broker.cluster.election import IsrMember, IsrProposal
from headwater_broker.cluster.state import BrokerEpoch, LeaderEpoch, PartitionEpoch
from headwater_broker.log.leader_epoch import UNDEFINED_EPOCH
from headwater_broker.log.partition import AppendResult, PartitionLog
from headwater_broker.replication.acks import AckWaiters
from headwater_broker.replication.wire import (
    Diverging,
    FetchPartition,
    PartitionResult,
    ReplicaFetchRequest,
    encode_response,
)

log = logging.getLogger("headwater.broker.replication")


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower from its fetches."""

    broker_id: int
    broker_epoch: int = -1
    log_end_offset: int = -1  # its last fetch offset; -1 before its first fetch in this epoch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = 0

    def update(self, fetch_offset: int, broker_epoch: int, leader_end: int, now_ms: int) -> None:
        """Kafka's ``Replica.updateFetchState``."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.broker_epoch = broker_epoch
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms

    def silent(self, now_ms: int, silent_ms: int) -> bool:
        """No fetch for ``silent_ms``: the link to this follower is broken (or it is stopped)."""
        return now_ms - self.last_fetch_ms > silent_ms

    def caught_up(self, leader_end: int, now_ms: int, lag_time_max_ms: int) -> bool:
        """At the leader's log end, or caught up within the last ``lag_time_max_ms``."""
        return (
            self.log_end_offset == leader_end or now_ms - self.last_caught_up_ms <= lag_time_max_ms
        )


class PartitionLeader:
    """This broker leading one partition in one leader epoch."""

    def __init__(
        self,
        plog: PartitionLog,
        *,
        broker_id: int,
        broker_epoch: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        now_ms: int,
        replica_lag_time_max_ms: int = 10_000,
        min_insync_replicas: int = 1,
        is_eligible: Callable[[int], bool] | None = None,
        fetch_timeout_ms: int = 1000,
    ) -> None:
        self.plog = plog
        self.name = f"{plog.topic}-{plog.partition}"
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr: tuple[int, ...] = tuple(isr)
        self.lag_time_max_ms = replica_lag_time_max_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.min_insync_replicas = min_insync_replicas
        self.is_eligible = is_eligible or (lambda _broker: True)
        self.pending: IsrProposal | None = None
        self.acks = AckWaiters(self.name)
        self.resigned = False
        # In-sync followers count as caught up and fetching now, so none is dropped before it
        # could fetch.
        self.followers = {
            r: FollowerState(r, last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
            if r in self.isr
            else FollowerState(r)
            for r in replicas
            if r != broker_id
        }
        plog.set_replicated(True)
        plog.assign_leader_epoch(leader_epoch)
        self.epoch_start_offset = plog.log_end_offset
        self.maybe_advance_high_watermark(now_ms)

    @property
    def high_watermark_known(self) -> bool:
        """Whether the high watermark has reached the start offset of this leader epoch.

        Every offset the previous leader committed is below that start (this replica was in
        sync, so its log end was at least that leader's high watermark), but the high
        watermark this replica brought from following lags by up to a fetch round. Until the
        followers' first fetches in this epoch lift it there, an end offset read from it could
        be lower than one already reported: Kafka's KIP-207 answers OFFSET_NOT_AVAILABLE then.
        """
        return self.plog.high_watermark >= self.epoch_start_offset

    async def wait_high_watermark_known(self, timeout_s: float) -> bool:
        """Wait (bounded) until :attr:`high_watermark_known`; True if it is."""
        if not self.high_watermark_known:
            await self.plog.wait_for_data(self.epoch_start_offset - 1, timeout_s)
        return self.high_watermark_known

    # --- state from the controller ----------------------------------------------------------

    @property
    def maximal_isr(self) -> set[int]:
        members = set(self.isr)
        if self.pending is not None:
            members.update(m.broker_id for m in self.pending.isr)
        return members

    def update_partition(
        self, *, partition_epoch: int, isr: list[int], replicas: list[int], now_ms: int
    ) -> None:
        """The controller committed a new state in this leader epoch (an ISR or replica change)."""
        if partition_epoch < self.partition_epoch:
            return
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self.pending = None
        for r in replicas:
            if r != self.broker_id and r not in self.followers:
                self.followers[r] = FollowerState(r)
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]
        self.replicas = list(replicas)
        self.maybe_advance_high_watermark(now_ms)

    def proposal_failed(self) -> None:
        """The controller refused or did not answer the pending proposal."""
        self.pending = None

    def resign(self, error: BrokerError | None = None) -> None:
        """This broker no longer leads in this epoch: fail every acks=all wait (421 by default)."""
        self.resigned = True
        self.acks.fail_all(error or self._ended())

    def _ended(self) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(
            f"Broker {self.broker_id} no longer leads {self.name} "
            f"(leader epoch {self.leader_epoch} ended)"
        )

    # --- high watermark and in-sync set -----------------------------------------------------

    @property
    def silent_ms(self) -> int:
        """How long an in-sync follower may send no fetch while behind (see out_of_sync)."""
        return 2 * self.fetch_timeout_ms

    def compute_high_watermark(self, now_ms: int) -> int:
        leader_end = self.plog.log_end_offset
        hw = int(self.plog.local_end_offset)
        maximal = self.maximal_isr
        for follower in self.followers.values():
            # About to join (caught up lately, eligible), unless its fetches stopped: one just
            # dropped for its silence must not hold the high watermark for the lag time.
            joining = (
                follower.caught_up(leader_end, now_ms, self.lag_time_max_ms)
                and self.is_eligible(follower.broker_id)
                and not follower.silent(now_ms, self.silent_ms)
            )
            if follower.broker_id in maximal or joining:
                hw = min(hw, follower.log_end_offset)
        return hw

    def maybe_advance_high_watermark(self, now_ms: int) -> bool:
        """Recompute the high watermark; when it moved, answer the acks=all waits it passed."""
        moved = self.plog.advance_high_watermark(self.compute_high_watermark(now_ms))
        if moved:
            self.acks.on_high_watermark(
                self.plog.high_watermark, len(self.isr), self.min_insync_replicas
            )
        return moved

    def out_of_sync(self, now_ms: int) -> list[int]:
        """In-sync followers not caught up for ``replica.lag.time.max.ms``, or behind the log
        end with no fetch for twice ``BROKER_REPLICA_FETCH_TIMEOUT_MS``: their link is broken
        (a healthy follower's long poll comes back every ``fetch max wait``), so acks=all need
        not wait out the lag time for them. Twice: a follower reports an unreachable leader after
        one timeout, so when every follower stopped fetching because the leader is the one cut
        off, the controller moves the leadership before this shrink is proposed."""
        leader_end = self.plog.log_end_offset
        return [
            b
            for b in self.isr
            if b in self.followers
            and (
                not self.followers[b].caught_up(leader_end, now_ms, self.lag_time_max_ms)
                or (
                    self.followers[b].log_end_offset < leader_end
                    and self.followers[b].silent(now_ms, self.silent_ms)
                )
            )
        ]

    def ready_to_join(self) -> list[int]:
        """Replicas outside the in-sync set whose log reaches the high watermark and this epoch."""
        hw = self.plog.high_watermark
        return [
            f.broker_id
            for f in self.followers.values()
            if f.broker_id not in self.isr
            and f.log_end_offset >= hw
            and f.log_end_offset >= self.epoch_start_offset
            and self.is_eligible(f.broker_id)
        ]

    def isr_proposal(self, now_ms: int) -> IsrProposal | None:
        """The in-sync set change to propose now, if any and none is pending (becomes pending).

        Shrinks first (every lagging member at once), else expands (every ready replica).
        """
        if self.pending is not None or self.resigned:
            return None
        lagging = self.out_of_sync(now_ms)
        if lagging:
            isr = tuple(b for b in self.isr if b not in lagging)
            log.info("%s: proposing to shrink the ISR %s to %s", self.name, self.isr, isr)
        else:
            joining = self.ready_to_join()
            if not joining:
                return None
            isr = (*self.isr, *joining)
            log.info("%s: proposing to expand the ISR %s to %s", self.name, self.isr, isr)

        def member(broker: int) -> IsrMember:
            epoch = self.broker_epoch if broker == self.broker_id else -1
            if broker in self.followers:
                epoch = self.followers[broker].broker_epoch
            return IsrMember(BrokerId(broker), BrokerEpoch(epoch))

        plog = self.plog
        self.pending = IsrProposal(
            plog.topic,
            plog.partition,
            BrokerId(self.broker_id),
            LeaderEpoch(self.leader_epoch),
            PartitionEpoch(self.partition_epoch),
            tuple(member(b) for b in isr),
        )
        return self.pending

    # --- follower fetches -------------------------------------------------------------------

    def _result(self, entry: FetchPartition, **fields: object) -> PartitionResult:
        plog = self.plog
        return PartitionResult(
            entry.topic,
            entry.partition,
            leader_epoch=self.leader_epoch,
            high_watermark=plog.high_watermark,
            log_start_offset=plog.log_start_offset,
            log_end_offset=plog.log_end_offset,
            **fields,  # type: ignore[arg-type]
        )

    def _error(self, entry: FetchPartition, error: BrokerError) -> PartitionResult:
        return self._result(entry, error_code=error.error_code, message=error.message)

    def handle_fetch(
        self, entry: FetchPartition, replica_id: int, broker_epoch: int, now_ms: int
    ) -> PartitionResult:
        """Answer one partition of a follower's fetch and record what it says of the follower."""
        if self.resigned:
            return self._error(
                entry, NotLeaderOrFollowerError(f"Broker {self.broker_id} no longer leads")
            )
        follower = self.followers.get(replica_id)
        if follower is None:
            return self._error(
                entry,
                NotLeaderOrFollowerError(
                    f"Broker {replica_id} is not a replica of {self.name} (replicas "
                    f"{self.replicas})"
                ),
            )
        if entry.leader_epoch < self.leader_epoch:
            return self._error(
                entry,
                FencedLeaderEpochError(
                    f"{self.name}: fetch with leader epoch {entry.leader_epoch}, current is "
                    f"{self.leader_epoch}"
                ),
            )
        if entry.leader_epoch > self.leader_epoch:
            return self._error(
                entry,
                UnknownLeaderEpochError(
                    f"{self.name}: fetch with leader epoch {entry.leader_epoch}, this leader "
                    f"knows {self.leader_epoch}"
                ),
            )
        if broker_epoch < follower.broker_epoch:
            return self._error(
                entry,
                StaleBrokerEpochError(
                    f"{self.name}: broker {replica_id} fetched with broker epoch "
                    f"{follower.broker_epoch}, this fetch carries {broker_epoch}"
                ),
            )
        plog = self.plog
        if plog.closed:
            return self._error(entry, plog.closed_error())
        leader_end = plog.log_end_offset
        if entry.last_fetched_epoch != UNDEFINED_EPOCH:
            end = plog.epochs.end_offset_for(entry.last_fetched_epoch, leader_end)
            if end.epoch < entry.last_fetched_epoch or end.end_offset < entry.fetch_offset:
                return self._result(entry, diverging=Diverging(end.epoch, end.end_offset))
        try:
            data = plog.read(entry.fetch_offset, entry.max_bytes, upper_bound=leader_end)
        except BrokerError as exc:
            # Out of range (41601), or the log was closed or deleted meanwhile: this entry's
            # answer, not the whole request's.
            return self._error(entry, exc)
        follower.update(entry.fetch_offset, broker_epoch, leader_end, now_ms)
        self.maybe_advance_high_watermark(now_ms)
        return self._result(entry, records=data.data)

    # --- produce ----------------------------------------------------------------------------

    def check_min_isr(self) -> None:
        """NotEnoughReplicasError (503 50303) when acks=all cannot be satisfied now."""
        if len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.name}: {len(self.isr)} replica(s) in sync {list(self.isr)}, fewer than "
                f"min.insync.replicas={self.min_insync_replicas}; nothing was appended"
            )

    async def append(
        self,
        buf: bytearray,
        batches: list[tuple[int, BatchHeader]],
        now_ms: int,
        *,
        acks: int,
        timeout_s: float,
    ) -> list[AppendResult]:
        """Append stamped with this leader epoch; with ``acks=-1`` (all) wait for the ISR.

        Refused (421) once this leader epoch has ended, also when it ends while the append waits
        for the log's lock: by then the replica may be a follower whose log was truncated, and
        a batch written there would neither carry the current epoch nor be replicated.
        """
        self.check_leading()
        if acks == -1:
            self.check_min_isr()
        results = await self.plog.append(
            buf, batches, now_ms, leader_epoch=self.leader_epoch, guard=self.check_leading
        )
        self.maybe_advance_high_watermark(now_ms)
        if acks == -1 and results:
            await self.wait_for_acks(max(r.last_offset for r in results), timeout_s)
        return results

    def check_leading(self) -> None:
        """NotLeaderOrFollowerError (421) once this leader epoch has ended here."""
        if self.resigned:
            raise self._ended()

    async def wait_for_acks(self, last_offset: int, timeout_s: float) -> None:
        """Return once the high watermark passes ``last_offset`` with enough replicas in sync.

        Judged by this leader epoch only: once it has ended, the log's high watermark is a
        follower's (what another leader committed), which says nothing of this epoch's
        appends, so the answer is 421 whatever it shows.
        """
        self.check_leading()
        if self.plog.high_watermark > last_offset:
            # Already replicated (a duplicate of an old batch, or one replica): judge it now.
            if len(self.isr) < self.min_insync_replicas:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.name}: offset {last_offset} was appended, but only {len(self.isr)} "
                    f"replica(s) are in sync, fewer than "
                    f"min.insync.replicas={self.min_insync_replicas}"
                )
            return
        await self.acks.wait(last_offset, timeout_s)


async def serve_fetch(
    request: ReplicaFetchRequest,
    leader_for: Callable[[str, int], PartitionLeader | None],
    not_leader: Callable[[FetchPartition], PartitionResult],
    now_ms: Callable[[], int],
) -> list[PartitionResult]:
    """Answer a whole replica fetch, long-polling up to ``max_wait_ms`` for ``min_bytes``.

    ``leader_for`` finds this broker's leader object of a partition (None: not the leader;
    ``not_leader`` makes that entry's answer). Returns at once when anything but plain records
    is to be said (an error, a divergence) or enough bytes are there; otherwise waits for any
    of the partitions' log ends to move, once, and answers again.
    """

    def one_pass() -> tuple[list[PartitionResult], bool]:
        results: list[PartitionResult] = []
        total = 0
        urgent = False
        now = now_ms()
        for entry in request.partitions:
            leader = leader_for(entry.topic, entry.partition)
            if leader is None:
                result = not_leader(entry)
            else:
                result = leader.handle_fetch(entry, request.replica_id, request.broker_epoch, now)
            if result.error_code or result.diverging is not None:
                urgent = True
            total += len(result.records)
            results.append(result)
        return results, urgent or total >= request.min_bytes

    results, done = one_pass()
    if done or request.max_wait_ms <= 0:
        return results
    waits: set[asyncio.Future[None]] = set()
    for entry in request.partitions:
        leader = leader_for(entry.topic, entry.partition)
        if leader is not None:
            waits.add(leader.plog.end_changed())
    if waits:
        # asyncio.wait neither cancels nor consumes them: they are the logs' shared waiters.
        await asyncio.wait(
            waits, timeout=request.max_wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED
        )
    else:
        await asyncio.sleep(request.max_wait_ms / 1000)
    return one_pass()[0]


async def answer_fetch(
    body: bytes,
    leader_for: Callable[[str, int], PartitionLeader | None],
    leader_hint: Callable[[str, int], NotLeaderOrFollowerError],
    now_ms: Callable[[], int],
) -> list[bytes | memoryview]:
    """The leader's answer to a ``POST /replication/fetch`` body, as chunks to send.

    Raises MalformedRequestError (400) for a bad body; every per-partition problem is in the
    answer's table. ``leader_hint`` makes the 42101 of a partition this broker does not lead.
    """
    request = ReplicaFetchRequest.from_json(body)

    def not_leader(entry: FetchPartition) -> PartitionResult:
        error = leader_hint(entry.topic, entry.partition)
        return PartitionResult(
            entry.topic,
            entry.partition,
            error.error_code,
            error.message,
            leader_epoch=error.leader_epoch,
        )

    return encode_response(await serve_fetch(request, leader_for, not_leader, now_ms))
