"""The roles of this broker's replicas: leaders, fetchers, in-sync proposals and checkpoints.

The metadata applier (``headwater_broker.replicas``) tells it, from each metadata image, which
hosted partitions this broker leads (:meth:`Replication.lead`) and which it follows at which
leader (:meth:`Replication.follow`). The role is recorded in the partition's registry entry
(``partitions.py``: a :class:`PartitionLeader` per led partition, the followed leader and epoch
per followed one); this keeps one :class:`ReplicaFetcher` per leader broker followed, and runs
one background loop that sends the leaders' in-sync proposals to the controller and checkpoints
high watermarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import httpx

from headwater.errors import HeadwaterError
from headwater_broker import metrics
from headwater_broker.cluster.election import IsrProposal
from headwater_broker.cluster.state import PartitionState
from headwater_broker.partitions import HostedPartition, PartitionRegistry
from headwater_broker.replication.fetcher import ReplicaFetcher
from headwater_broker.replication.follower import FollowerPartition
from headwater_broker.replication.leader import PartitionLeader
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker.replication")

Key = tuple[str, int]
CHECKPOINT_INTERVAL_S = 5.0


class Replication:
    """Leaders and fetchers of one broker (``start()`` / ``close()``)."""

    def __init__(
        self,
        registry: PartitionRegistry,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        now_ms: Callable[[], int],
        send_isr: Callable[[IsrProposal], Awaitable[PartitionState]],
        is_active: Callable[[int], bool],
        isr_interval_s: float = 0.25,
        fetch_max_wait_ms: int = 500,
        fetch_timeout_ms: int = 1000,
        on_disk_failure: Callable[[str], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.registry = registry
        self.ssl_context = ssl_context
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.now_ms = now_ms
        self.send_isr = send_isr
        self.is_active = is_active
        self.isr_interval_s = isr_interval_s
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.on_disk_failure = on_disk_failure
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks = BackgroundTasks(log)  # the loop, proposals in flight, fetchers stopping
        self._sending: set[Key] = set()
        self._lag_series: set[Key] = set()

    def start(self) -> None:
        self._tasks.spawn(self._loop(), "replication")

    @property
    def failed_tasks(self) -> dict[str, str]:
        """Tasks that died (the loop, a proposal, a fetcher): the broker is not ready."""
        failed = dict(self._tasks.failed)
        for fetcher in self.fetchers.values():
            failed.update(fetcher.failed_tasks)
        return failed

    async def close(self) -> None:
        await self._tasks.stop()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        for hosted in self.registry:
            if hosted.leader is not None:
                hosted.leader.resign()
                hosted.leader = None
            hosted.followed = None
            with contextlib.suppress(OSError):
                hosted.log.checkpoint_high_watermark()

    # --- roles --------------------------------------------------------------------------------

    def lead(
        self,
        hosted: HostedPartition,
        state: PartitionState,
        *,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
    ) -> PartitionLeader:
        """Lead ``hosted`` as ``state`` says (a new leader epoch, or new ISR / replicas in it)."""
        self._unfollow(hosted)
        plog = hosted.log
        leader = hosted.current_leader()
        now = self.now_ms()
        if leader is not None and leader.leader_epoch == state.leader_epoch:
            leader.min_insync_replicas = min_insync_replicas
            leader.lag_time_max_ms = replica_lag_time_max_ms
            if state.partition_epoch > leader.partition_epoch:
                leader.update_partition(
                    partition_epoch=state.partition_epoch,
                    isr=list(state.isr),
                    replicas=list(state.replicas),
                    now_ms=now,
                )
            return leader
        self._resign(hosted)
        leader = PartitionLeader(
            plog,
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            replicas=list(state.replicas),
            isr=list(state.isr),
            now_ms=now,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            min_insync_replicas=min_insync_replicas,
            is_eligible=self.is_active,
            fetch_timeout_ms=self.fetch_timeout_ms,
        )
        hosted.leader = leader
        return leader

    def unreachable_leaders(self) -> list[int]:
        """Leaders followed here that have answered no fetch for ``fetch_timeout_ms``."""
        limit = self.fetch_timeout_ms / 1000
        return sorted(b for b, f in self.fetchers.items() if f.silent_s() > limit)

    def follow(
        self, hosted: HostedPartition, state: PartitionState, leader_url: str | None
    ) -> None:
        """Follow ``state.leader`` (nothing is fetched while it is unknown or this broker)."""
        self._resign(hosted)
        plog = hosted.log
        if state.leader < 0 or state.leader == self.broker_id or leader_url is None:
            self._unfollow(hosted)
            plog.set_replicated(True)
            return
        if hosted.followed == (state.leader, state.leader_epoch):
            fetcher = self.fetchers.get(state.leader)
            if fetcher is not None and fetcher.leader_url == leader_url.rstrip("/"):
                return
        self._unfollow(hosted)
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None or fetcher.leader_url != leader_url.rstrip("/"):
            if fetcher is not None:
                self._spawn(fetcher.stop())
            fetcher = ReplicaFetcher(
                broker_id=self.broker_id,
                broker_epoch=self.broker_epoch,
                leader_id=state.leader,
                leader_url=leader_url,
                now_ms=self.now_ms,
                max_wait_ms=self.fetch_max_wait_ms,
                on_disk_failure=self.on_disk_failure,
                ssl_context=self.ssl_context,
            )
            self.fetchers[state.leader] = fetcher
            fetcher.start()
        fetcher.add(
            FollowerPartition(plog, leader_id=state.leader, leader_epoch=state.leader_epoch)
        )
        hosted.followed = (state.leader, state.leader_epoch)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(work, "replication-step")

    def drop(self, hosted: HostedPartition) -> None:
        """Neither lead nor follow the partition any more (its replica is being deleted)."""
        self._resign(hosted)
        self._unfollow(hosted)

    def _resign(self, hosted: HostedPartition) -> None:
        leader, hosted.leader = hosted.leader, None
        if leader is not None:
            leader.resign()
        key = (hosted.log.topic, int(hosted.log.partition))
        if key in self._lag_series:
            # At once, not at the next metrics pass: a deleted topic's series go with it.
            self._lag_series.discard(key)
            with contextlib.suppress(KeyError):
                metrics.FOLLOWER_LAG.remove(key[0], str(key[1]))

    def _unfollow(self, hosted: HostedPartition) -> None:
        followed, hosted.followed = hosted.followed, None
        if followed is None:
            return
        fetcher = self.fetchers.get(followed[0])
        if fetcher is not None:
            fetcher.remove(hosted.log.topic, int(hosted.log.partition))

    # --- background ---------------------------------------------------------------------------

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_checkpoint = loop.time() + CHECKPOINT_INTERVAL_S
        while True:
            await asyncio.sleep(self.isr_interval_s)
            now = self.now_ms()
            for leader in self.registry.leaders():
                key = (leader.plog.topic, int(leader.plog.partition))
                leader.maybe_advance_high_watermark(now)
                if key in self._sending:
                    continue
                proposal = leader.isr_proposal(now)
                if proposal is not None:
                    self._sending.add(key)
                    self._spawn(self._propose(key, leader, proposal))
            self._update_metrics()
            if loop.time() >= next_checkpoint:
                next_checkpoint = loop.time() + CHECKPOINT_INTERVAL_S
                for plog in self.registry.logs():
                    try:
                        plog.checkpoint_high_watermark()
                    except OSError as exc:
                        log.warning("checkpointing the high watermark of %s: %s", plog.topic, exc)

    def _update_metrics(self) -> None:
        under_replicated = under_min_isr = 0
        series: set[Key] = set()
        for leader in self.registry.leaders():
            topic, partition = leader.plog.topic, int(leader.plog.partition)
            series.add((topic, partition))
            if len(leader.isr) < len(leader.replicas):
                under_replicated += 1
            if len(leader.isr) < leader.min_insync_replicas:
                under_min_isr += 1
            end = leader.plog.log_end_offset
            lag = max(
                (end - max(f.log_end_offset, 0) for f in leader.followers.values()), default=0
            )
            metrics.FOLLOWER_LAG.labels(topic, str(partition)).set(lag)
        metrics.UNDER_REPLICATED_PARTITIONS.set(under_replicated)
        metrics.UNDER_MIN_ISR_PARTITIONS.set(under_min_isr)
        for topic, partition in self._lag_series - series:
            with contextlib.suppress(KeyError):
                metrics.FOLLOWER_LAG.remove(topic, str(partition))
        self._lag_series = series

    async def _propose(self, key: Key, leader: PartitionLeader, proposal: IsrProposal) -> None:
        try:
            state = await self.send_isr(proposal)
        except (HeadwaterError, httpx.HTTPError) as exc:
            log.warning("ISR proposal %s for %s-%d failed: %s", proposal.isr, *key, exc)
            leader.proposal_failed()
        else:
            if state.leader_epoch == leader.leader_epoch and not leader.resigned:
                leader.update_partition(
                    partition_epoch=state.partition_epoch,
                    isr=list(state.isr),
                    replicas=list(state.replicas),
                    now_ms=self.now_ms(),
                )
            else:
                leader.proposal_failed()
        finally:
            self._sending.discard(key)
