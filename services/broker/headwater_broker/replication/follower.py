"""The follower's side of replication for one partition: what to ask, how to apply the answer.

A :class:`FollowerPartition` exists while this broker follows a partition; the fetcher task of
its leader builds each request from :meth:`FollowerPartition.durable_fetch_entry` (fetch offset =
the log end, once durable; last fetched epoch = the latest epoch in the leader-epoch checkpoint)
and hands each partition's answer to :meth:`FollowerPartition.apply`:

- ``diverging {epoch, end_offset}`` -> truncate, as Kafka's ``getOffsetTruncationState``: when
  this log has that epoch, to the smaller of its own end of it and the leader's (done); when its
  largest epoch at or below it is another one, to the smaller of that epoch's end and the
  leader's (and the next fetch compares again: KIP-279's rounds for fast leader flips); when it
  knows no such epoch, to the leader's end offset; an undefined end: to the high watermark.
- records -> appended as the leader stored them (``PartitionLog.append_as_follower``).
- the high watermark -> ``min(leader's, own log end)``.
- offset out of range -> a log ending past the leader's is cut to the leader's end (only an
  unclean election makes that happen); one ending before the leader's log start restarts empty
  there.
- a truncation below this replica's high watermark cuts committed records (only an unclean
  election makes that happen): the range is logged and counted in
  ``headwater_broker_unclean_truncated_records_total``.
- fenced / unknown leader epoch, not leader, stale broker epoch -> nothing changes; the outcome
  says whether to wait for new metadata or to retry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from headwater.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    StaleBrokerEpochError,
    UnknownLeaderEpochError,
)
from headwater_broker import metrics
from headwater_broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from headwater_broker.log.partition import PartitionLog
from headwater_broker.replication.wire import (
    DEFAULT_PARTITION_MAX_BYTES,
    Diverging,
    FetchPartition,
    PartitionResult,
)

log = logging.getLogger("headwater.broker.replication")

_NEEDS_METADATA = {
    FencedLeaderEpochError.error_code,
    NotLeaderOrFollowerError.error_code,
    StaleBrokerEpochError.error_code,
}


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """What applying one answer did, and what the fetcher should do next."""

    records: int = 0  # records appended
    truncated_from: int | None = None  # log end before a truncation
    truncated_to: int | None = None  # log end after it
    error_code: int = 0
    message: str | None = None
    needs_metadata: bool = False  # our view of the leader is stale: wait for the next image
    retry: bool = False  # fetch again after a back-off (the leader is behind us, or cut off)


class FollowerPartition:
    """This broker following one partition of leader ``leader_id`` in ``leader_epoch``."""

    def __init__(self, plog: PartitionLog, *, leader_id: int, leader_epoch: int) -> None:
        self.plog = plog
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        plog.set_replicated(True)

    def fetch_entry(self, max_bytes: int = DEFAULT_PARTITION_MAX_BYTES) -> FetchPartition:
        plog = self.plog
        return FetchPartition(
            plog.topic,
            plog.partition,
            self.leader_epoch,
            plog.log_end_offset,
            plog.epochs.latest_epoch,
            max_bytes,
        )

    async def durable_fetch_entry(
        self, max_bytes: int = DEFAULT_PARTITION_MAX_BYTES
    ) -> FetchPartition:
        """:meth:`fetch_entry` once the log end it names is durable (``PartitionLog.sync_written``):
        the leader counts a fetch offset towards the high watermark, so under
        ``BROKER_FSYNC=always`` it must name synced batches only, even while an earlier apply's
        (or, for a former leader, an append's) fdatasync is still in flight."""
        await self.plog.sync_written()
        return self.fetch_entry(max_bytes)

    def truncation_target(self, diverging: Diverging) -> int:
        """Where to cut this log for the leader's ``diverging`` answer (Kafka's rules)."""
        plog = self.plog
        leo = plog.log_end_offset
        if diverging.end_offset == UNDEFINED_OFFSET:
            return min(plog.high_watermark, leo)
        if diverging.epoch == UNDEFINED_EPOCH:
            return min(diverging.end_offset, leo)
        mine = plog.epochs.end_offset_for(diverging.epoch, leo)
        if mine.undefined:
            return min(diverging.end_offset, leo)
        return min(mine.end_offset, diverging.end_offset, leo)

    async def apply(self, result: PartitionResult, now_ms: int) -> ApplyOutcome:
        plog = self.plog
        if result.error_code == OffsetOutOfRangeError.error_code:
            return await self._out_of_range(result)
        if result.error_code:
            return ApplyOutcome(
                error_code=result.error_code,
                message=result.message,
                needs_metadata=result.error_code in _NEEDS_METADATA,
                retry=result.error_code not in _NEEDS_METADATA
                or result.error_code == UnknownLeaderEpochError.error_code,
            )
        if result.diverging is not None:
            before = plog.log_end_offset
            committed = plog.high_watermark
            target = self.truncation_target(result.diverging)
            after = await plog.truncate_to(target)
            self._count_committed_loss(committed, before, after)
            if after < before:
                log.warning(
                    "%s-%d diverges from leader %d (epoch %d ends at %d there): truncated "
                    "offsets [%d, %d)",
                    plog.topic,
                    plog.partition,
                    self.leader_id,
                    result.diverging.epoch,
                    result.diverging.end_offset,
                    after,
                    before,
                )
                return ApplyOutcome(truncated_from=before, truncated_to=after)
            return ApplyOutcome()
        records = 0
        if result.records:
            records = await plog.append_as_follower(result.records, now_ms)
        plog.advance_high_watermark(min(result.high_watermark, plog.log_end_offset))
        return ApplyOutcome(records=records)

    def _count_committed_loss(self, committed: int, before: int, after: int) -> None:
        """Log and count the records cut below this replica's high watermark: committed ones,
        which only an unclean leader election can take away (docs/cluster.md)."""
        lost_end = min(committed, before)
        if after >= lost_end:
            return
        plog = self.plog
        log.error(
            "%s-%d: truncated committed offsets [%d, %d) (%d records below the high watermark) "
            "to follow leader %d at epoch %d: lost to an unclean leader election",
            plog.topic,
            plog.partition,
            after,
            lost_end,
            lost_end - after,
            self.leader_id,
            self.leader_epoch,
        )
        metrics.UNCLEAN_TRUNCATED_RECORDS.labels(plog.topic, str(plog.partition)).inc(
            lost_end - after
        )

    async def _out_of_range(self, result: PartitionResult) -> ApplyOutcome:
        plog = self.plog
        before = plog.log_end_offset
        if 0 <= result.log_end_offset < before:
            log.warning(
                "%s-%d ends at %d, past leader %d's log end %d: truncating (unclean leader "
                "election)",
                plog.topic,
                plog.partition,
                before,
                self.leader_id,
                result.log_end_offset,
            )
            committed = plog.high_watermark
            after = await plog.truncate_to(result.log_end_offset)
            self._count_committed_loss(committed, before, after)
            return ApplyOutcome(truncated_from=before, truncated_to=after)
        if result.log_start_offset > before:
            await plog.truncate_fully_and_start_at(result.log_start_offset)
            return ApplyOutcome(truncated_from=before, truncated_to=result.log_start_offset)
        return ApplyOutcome(error_code=result.error_code, message=result.message, retry=True)
