"""Replicas of one partition in one process, on real log directories, driven step by step.

Each replica has its own PartitionLog directory; fetches go through the real wire format
(request JSON, framed answer) between :func:`serve_fetch` on the leader and
:meth:`FollowerPartition.apply` on the follower. The controller's part (elections from the
in-sync set, committing ISR proposals, removing a crashed broker from the ISR) is played by this
class with the rules of docs/cluster.md, so the tests exercise the storage and protocol layer
exactly, with the cluster wiring replaced by direct calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from headwater.errors import NotLeaderOrFollowerError
from headwater.records.batch import decode_batches, encode_batch, iter_batches
from headwater.types import PartitionId
from headwater_broker.log.local_log import FsyncPolicy
from headwater_broker.log.partition import PartitionLog
from headwater_broker.replication.follower import ApplyOutcome, FollowerPartition
from headwater_broker.replication.leader import PartitionLeader, serve_fetch
from headwater_broker.replication.wire import (
    FetchPartition,
    PartitionResult,
    ReplicaFetchRequest,
    decode_response,
    encode_response,
)
from headwater_broker.topic_config import TopicConfig

LAG_MS = 1000
NOW = 1_800_000_000_000


def values_batch(values: list[str], *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    return encode_batch(
        [(None, v.encode(), []) for v in values],
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def log_bytes(plog: PartitionLog, end: int | None = None) -> bytes:
    """The log's batches from its start up to ``end`` (default: its log end)."""
    end = plog.log_end_offset if end is None else end
    out = b""
    offset: int = plog.log_start_offset
    while offset < end:
        data = plog.read(offset, 1 << 20, upper_bound=plog.log_end_offset)
        if not data.data:
            break
        for pos, header in iter_batches(data.data):
            if header.base_offset >= end:
                return out
            out += data.data[pos : pos + header.size]
            offset = header.last_offset + 1
    return out


def log_values(plog: PartitionLog, end: int | None = None) -> list[str]:
    return [bytes(r.value or b"").decode() for r in decode_batches(log_bytes(plog, end))]


@dataclass
class Replica:
    broker_id: int
    path: Path
    plog: PartitionLog
    incarnation: int = 1
    leader: PartitionLeader | None = None
    follower: FollowerPartition | None = None
    outcomes: list[ApplyOutcome] = field(default_factory=list)


class Sim:
    def __init__(
        self,
        root: Path,
        n: int = 3,
        *,
        segment_bytes: int = 600,
        min_isr: int = 1,
        fsync: FsyncPolicy = "never",
    ) -> None:
        self.config = TopicConfig(segment_bytes=segment_bytes)
        self.fsync: FsyncPolicy = fsync
        self.replicas = [Replica(b, root / f"b{b}", self._open(root / f"b{b}")) for b in range(n)]
        self.ids = list(range(n))
        self.isr = list(range(n))
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.now = NOW
        self.min_isr = min_isr
        self.leader_id = -1
        self.elect(0)

    def _open(self, path: Path) -> PartitionLog:
        return PartitionLog.open(
            path, "t", PartitionId(0), self.config, self.fsync, replicated=True
        )

    @property
    def leader(self) -> Replica:
        return self.replicas[self.leader_id]

    @property
    def lead(self) -> PartitionLeader:
        assert self.leader.leader is not None
        return self.leader.leader

    def elect(self, broker_id: int) -> None:
        """A new leader epoch with ``broker_id`` leading; everyone else follows it."""
        self.leader_epoch += 1
        self.partition_epoch += 1
        for replica in self.replicas:
            if replica.leader is not None:
                replica.leader.resign()
                replica.leader = None
        self.leader_id = broker_id
        new = self.replicas[broker_id]
        new.follower = None
        new.leader = PartitionLeader(
            new.plog,
            broker_id=broker_id,
            broker_epoch=new.incarnation,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            replicas=self.ids,
            isr=self.isr,
            now_ms=self.now,
            replica_lag_time_max_ms=LAG_MS,
            min_insync_replicas=self.min_isr,
        )
        for replica in self.replicas:
            if replica is not new:
                replica.follower = FollowerPartition(
                    replica.plog, leader_id=broker_id, leader_epoch=self.leader_epoch
                )

    async def append(self, values: list[str], **producer: int) -> tuple[int, int]:
        body = bytearray(values_batch(values, **producer))
        results = await self.lead.append(
            body, list(iter_batches(body)), self.now, acks=1, timeout_s=1
        )
        return results[0].base_offset, results[0].last_offset

    async def fetch(
        self, broker_id: int, max_bytes: int = 1 << 20, *, entry: FetchPartition | None = None
    ) -> PartitionResult:
        """One fetch round of ``broker_id`` from the leader, over the wire format."""
        replica = self.replicas[broker_id]
        assert replica.follower is not None
        request = ReplicaFetchRequest(
            broker_id,
            replica.incarnation,
            [entry or replica.follower.fetch_entry(max_bytes)],
            max_wait_ms=0,
        )
        parsed = ReplicaFetchRequest.from_json(request.to_json())
        leader = self.leader.leader

        def not_leader(e: FetchPartition) -> PartitionResult:
            error = NotLeaderOrFollowerError("not the leader")
            return PartitionResult(e.topic, e.partition, error.error_code, error.message)

        results = await serve_fetch(parsed, lambda _t, _p: leader, not_leader, lambda: self.now)
        (result,) = decode_response(b"".join(encode_response(results)))
        replica.outcomes.append(await replica.follower.apply(result, self.now))
        return result

    async def catch_up(self, rounds: int = 50) -> None:
        """Fetch until every follower has the leader's log and high watermark (bounded)."""
        for _ in range(rounds):
            for replica in self.replicas:
                if replica.follower is not None:
                    await self.fetch(replica.broker_id)
            self.isr_step(commit=True)
            lead = self.leader.plog
            if all(
                r.plog.log_end_offset == lead.log_end_offset
                and r.plog.high_watermark == lead.high_watermark == lead.log_end_offset
                for r in self.replicas
            ) and len(self.isr) == len(self.replicas):
                return
        raise AssertionError("replicas did not catch up")

    def isr_step(self, *, commit: bool) -> None:
        """Let the leader propose an ISR change; the controller commits it (or it stays pending)."""
        lead = self.lead
        if lead.pending is None:
            lead.isr_proposal(self.now)
        if commit and lead.pending is not None:
            self.partition_epoch += 1
            self.isr = [m.broker_id for m in lead.pending.isr]
            lead.update_partition(
                partition_epoch=self.partition_epoch,
                isr=self.isr,
                replicas=self.ids,
                now_ms=self.now,
            )

    def crash(self, broker_id: int) -> None:
        """kill -9 and restart of a broker: its files stay as written, its memory is lost.

        The controller fences it: out of the ISR unless it is the last member; a new leader from
        the rest of the ISR if it led (itself again, in a new epoch, when it was the last).
        """
        replica = self.replicas[broker_id]
        was_leader = replica.leader is not None
        if replica.leader is not None:
            replica.leader.resign()
            replica.leader = None
        for segment in replica.plog.local.segments:
            segment.close()
        replica.plog = self._open(replica.path)
        replica.incarnation += 1
        replica.follower = None
        if len(self.isr) > 1 and broker_id in self.isr:
            self.isr = [b for b in self.isr if b != broker_id]
            self.partition_epoch += 1
            if not was_leader:
                self.lead.update_partition(
                    partition_epoch=self.partition_epoch,
                    isr=self.isr,
                    replicas=self.ids,
                    now_ms=self.now,
                )
        if was_leader:
            self.elect(self.isr[0])
        else:
            replica.follower = FollowerPartition(
                replica.plog, leader_id=self.leader_id, leader_epoch=self.leader_epoch
            )
