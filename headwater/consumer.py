"""The Consumer: reads assigned partitions by offset, fetching raw batches and decoding them.

A consumer keeps, per assigned partition, the offset of the next record ``poll()`` returns (its
*position*). Positions start from ``seek()``, else from the group's committed offset (after
``subscribe()``), else from ``auto.offset.reset``. Fetches are stateless on the broker side (no
session or instance affinity); each partition's fetch goes to its leader through the cluster
client (:mod:`headwater.client.cluster`). A fetch that fails with a retriable error (a 421, a
leader that stops answering, a partition without a leader) returns nothing for that partition
in this round and holds it back for the delay the cluster client names, while the other
partitions go on being read.

Consumer groups (``headwater.groups.consumer_group.ConsumerGroup``, created by ``subscribe()``)
plug in at three points: ``_initial_position`` (the committed offset), ``_before_poll``
(applying assignment changes, auto-commit) and ``commit()``. The group sees this class only
through its ``PartitionOwner`` protocol. The fetch/position logic (``_fetch_partition``,
``_reset_position``, ``_take_buffered``) is separate from those and should not need to change.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

import httpx

from headwater.client.broker import BrokerClient, PartitionOffsets
from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.config import ConsumerConfig
from headwater.errors import HeadwaterError, OffsetOutOfRangeError
from headwater.groups.consumer_group import ConsumerGroup, RebalanceCallback
from headwater.records.batch import RecordFactory, decode_batch_as, iter_batches
from headwater.topic_partition import TopicPartition
from headwater.types import Offset, PartitionId, TimestampMs

log = logging.getLogger("headwater.consumer")


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record as ``poll()`` returns it."""

    topic: str
    partition: PartitionId
    offset: Offset
    timestamp: TimestampMs
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _record_factory(topic: str, partition: PartitionId) -> RecordFactory[ConsumerRecord]:
    """Builds ``topic``/``partition``'s ConsumerRecords for ``decode_batch_as``.

    A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__`` (about
    three times the cost of the rest of decoding a record); writing the slots through their
    member descriptors builds the same frozen object at a third of the cost.
    """
    new = object.__new__
    slots = ConsumerRecord.__dict__
    set_topic = slots["topic"].__set__
    set_partition = slots["partition"].__set__
    set_offset = slots["offset"].__set__
    set_timestamp = slots["timestamp"].__set__
    set_key = slots["key"].__set__
    set_value = slots["value"].__set__
    set_headers = slots["headers"].__set__

    def make(
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> ConsumerRecord:
        record: ConsumerRecord = new(ConsumerRecord)
        set_topic(record, topic)
        set_partition(record, partition)
        set_offset(record, offset)
        set_timestamp(record, timestamp)
        set_key(record, key)
        set_value(record, value)
        set_headers(record, headers)
        return record

    return make


class Consumer(Closeable):
    """Reads records from assigned partitions, in offset order per partition.

    Contract:

    * ``assign(partitions)`` replaces the assignment; ``seek(tp, offset)`` sets the next offset
      ``poll()`` returns for ``tp``; ``position(tp)`` tells it (resolving ``auto.offset.reset``
      first if no position is known yet).
    * ``poll(timeout)`` returns up to ``max.poll.records`` records, waiting up to ``timeout``
      seconds (long-polling the brokers) when none are available; ``[]`` on timeout.
    * When a position falls outside the log (retention deleted it, or a seek went past the end),
      ``auto.offset.reset`` ``earliest``/``latest`` moves it to the log start/end; ``none``
      raises ``OffsetOutOfRangeError``.
    * Batch CRCs are verified; a corrupt batch raises ``CorruptRecordError``. Control batches
      are skipped. Not thread-safe: one thread polls.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = ConsumerConfig.from_dict(config or {})
        cfg = self.config
        self._servers = ClusterClient(
            cfg.bootstrap_servers,
            timeout=cfg.request_timeout_ms / 1000,
            transport=transport,
            client_id=cfg.client_id,
            retry_backoff_ms=cfg.retry_backoff_ms,
        )
        self._held_until: dict[TopicPartition, float] = {}  # partitions backing off after errors
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, Offset | None] = {}
        self._buffered: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._round_robin = 0
        self._factories: dict[TopicPartition, RecordFactory[ConsumerRecord]] = {}
        self._closed = False
        self._group: ConsumerGroup | None = None  # set by subscribe() (consumer groups)

    # -- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions; positions of partitions kept are kept."""
        new = list(dict.fromkeys(TopicPartition(tp.topic, tp.partition) for tp in partitions))
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._buffered = {tp: self._buffered.get(tp, deque()) for tp in new}
        self._assignment = new

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next ``poll()`` returns ``tp``'s records from ``offset`` on."""
        self._require_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[tp] = Offset(offset)
        self._buffered[tp].clear()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._assignment if partitions is None else partitions:
            self.seek(tp, self._offsets(tp).beginning_offset)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._assignment if partitions is None else partitions:
            self.seek(tp, self._offsets(tp).end_offset)

    def _offsets(self, tp: TopicPartition) -> PartitionOffsets:
        """``tp``'s log start and end from its leader, retried up to ``request.timeout.ms``."""
        return self._servers.call_leader(
            tp.topic, tp.partition, lambda broker: broker.offsets(tp.topic, tp.partition)
        )

    def position(self, tp: TopicPartition) -> Offset:
        """The offset of the next record ``poll()`` returns for ``tp``."""
        self._require_assigned(tp)
        buffered = self._buffered[tp]
        if buffered:
            return buffered[0].offset
        return self._fetch_position(tp)

    def _require_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned to this consumer")

    def _fetch_position(self, tp: TopicPartition) -> Offset:
        position = self._positions[tp]
        if position is None:
            position = self._initial_position(tp)
            if position is None:
                position = self._reset_position(tp)
            self._positions[tp] = position
        return position

    def _initial_position(self, tp: TopicPartition) -> Offset | None:
        """Where to start ``tp`` when nothing was sought: groups return the committed offset."""
        return self._group.initial_position(tp) if self._group is not None else None

    def _reset_position(self, tp: TopicPartition) -> Offset:
        """Apply ``auto.offset.reset`` to ``tp``."""
        policy = self.config.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(f"no valid position for {tp} and auto.offset.reset is none")
        offsets = self._offsets(tp)
        return offsets.beginning_offset if policy == "earliest" else offsets.end_offset

    def _before_poll(self) -> None:
        """Hook at the start of every ``poll()``; groups heartbeat and auto-commit here."""
        if self._group is not None:
            self._group.before_poll()

    # -- polling ------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Up to ``max.poll.records`` records, waiting up to ``timeout`` seconds for some."""
        if self._closed:
            raise RuntimeError("poll() on a closed consumer")
        self._before_poll()
        if not self._assignment:
            time.sleep(max(timeout, 0))
            return []
        deadline = time.monotonic() + max(timeout, 0)
        out = self._take_buffered()
        if out:
            return out
        wait_ms = 0
        while True:
            fetched_any = False
            for tp in self._rotation():
                if self._held_until.get(tp, 0.0) > time.monotonic():
                    continue
                fetched_any = True
                self._buffered[tp].extend(self._fetch_partition(tp, wait_ms))
                if sum(len(b) for b in self._buffered.values()) >= self.config.max_poll_records:
                    break
            out = self._take_buffered()
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if out or remaining_ms <= 0:
                return out
            if not fetched_any:
                # Every partition is backing off after an error: wait for the first to be due.
                due = min(self._held_until.get(tp, 0.0) for tp in self._assignment)
                time.sleep(max(0.0, min(due, deadline) - time.monotonic()))
                continue
            # Nothing yet: long-poll, sharing the wait between partitions (fetch is per partition).
            wait_ms = max(
                min(remaining_ms, self.config.fetch_max_wait_ms) // len(self._assignment), 1
            )

    def _rotation(self) -> list[TopicPartition]:
        """Assigned partitions starting after the last one served, so none starves."""
        n = len(self._assignment)
        start = self._round_robin % n
        self._round_robin += 1
        return list(itertools.islice(itertools.cycle(self._assignment), start, start + n))

    def _take_buffered(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        limit = self.config.max_poll_records
        for tp in self._rotation():
            buffered = self._buffered[tp]
            room = limit - len(out)
            if len(buffered) <= room:  # the whole buffer at once, without a step per record
                out.extend(buffered)
                buffered.clear()
            else:
                popleft = buffered.popleft
                out.extend([popleft() for _ in range(room)])
            if len(out) >= limit:
                break
        return out

    def _fetch_partition(self, tp: TopicPartition, max_wait_ms: int) -> list[ConsumerRecord]:
        """Fetch and decode ``tp``'s records from its position; advance the position past them."""
        position = self._fetch_position(tp)
        leader: BrokerClient | None = None
        try:
            leader = self._servers.leader(tp.topic, tp.partition)
            fetched = leader.fetch_batches(
                tp.topic,
                tp.partition,
                position,
                max_bytes=self.config.max_partition_fetch_bytes,
                max_wait_ms=max_wait_ms,
            )
        except OffsetOutOfRangeError:
            if self.config.auto_offset_reset == "none":
                raise
            reset = self._reset_position(tp)
            log.info("%s: offset %d out of range, reset to %d", tp, position, reset)
            self._positions[tp] = reset
            return []
        except (httpx.TransportError, HeadwaterError) as exc:
            delay = self._servers.retry_delay(tp.topic, tp.partition, exc, leader)
            if delay is None:
                raise
            where = leader.base_url if leader is not None else "the cluster"
            log.info("fetch %s from %s failed, retrying in %.2fs: %s", tp, where, delay, exc)
            # Held back, not slept on: the other partitions' fetches go on meanwhile.
            self._held_until[tp] = time.monotonic() + delay
            return []
        self._held_until.pop(tp, None)
        records: list[ConsumerRecord] = []
        make = self._factories.get(tp)
        if make is None:
            make = self._factories[tp] = _record_factory(tp.topic, tp.partition)
        data = fetched.data
        next_position = position
        for pos, header in iter_batches(data, verify_crc=False):
            if header.last_offset < position:
                continue
            next_position = Offset(max(next_position, header.last_offset + 1))
            if header.is_control:
                continue
            # Records are built as ConsumerRecords directly (one object each, not two).
            decoded = decode_batch_as(data, pos, make)[1]
            if header.base_offset < position:
                decoded = [r for r in decoded if r.offset >= position]
            records.extend(decoded)
        self._positions[tp] = Offset(next_position)
        return records

    # -- consumer groups (headwater.groups; needs group.id and a coordinator) -----------------

    def subscribe(
        self,
        topics: Iterable[str],
        *,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        instance_id: str | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics``; the coordinator at ``coordinator.url`` assigns.

        A background thread heartbeats; assignment changes are applied at the start of
        ``poll()``, which calls ``on_revoke`` (after committing the revoked partitions with
        ``enable.auto.commit``) and ``on_assign`` with the partitions that changed. Assigned
        partitions start at the committed offset, else at ``auto.offset.reset``. With
        ``instance_id`` the member is static: it may restart within its session timeout and
        get its partitions back without a rebalance.
        """
        if self._group is None:
            self._group = ConsumerGroup(self, self.config)
        self._group.subscribe(topics, on_assign, on_revoke, instance_id)

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, *, asynchronous: bool = False
    ) -> Future[None] | None:
        """Commit ``offsets`` (the next offset to read, per partition; default: every assigned
        partition's position). Synchronous by default (raises the coordinator's error, e.g.
        ``UnknownMemberError`` for a member that was expired); ``asynchronous=True`` returns a
        ``Future``. Only the partitions' current owner at its current epoch may commit."""
        if self._group is None:
            raise RuntimeError("commit() needs group.id and subscribe()")
        return self._group.commit(offsets, asynchronous)

    def committed(self) -> dict[TopicPartition, Offset]:
        """The group's committed offsets as the coordinator has them now."""
        if self._group is None:
            raise RuntimeError("committed() needs group.id and subscribe()")
        return self._group.client.committed(self._group.group_id)

    def committable_positions(self) -> dict[TopicPartition, Offset]:
        """The position of each assigned partition that has one: what ``commit()`` stores by
        default (the next offset ``poll()`` returns, buffered records included)."""
        out: dict[TopicPartition, Offset] = {}
        for tp in self._assignment:
            buffered = self._buffered.get(tp)
            position = buffered[0].offset if buffered else self._positions.get(tp)
            if position is not None:
                out[tp] = position
        return out

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.close()
        self._servers.close()
