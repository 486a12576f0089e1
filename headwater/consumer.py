"""The Consumer: reads assigned partitions by offset, fetching raw batches and decoding them.

Its methods have confluent-kafka's names and shapes (``poll()`` one :class:`Message` or None,
``consume()`` a list, ``assign``/``seek``/``commit``/``committed``/``position`` over
:class:`TopicPartition`, ``subscribe(on_assign=, on_revoke=)``, ``list_topics()``); where
Headwater differs, docs/sdk.md says why ("Coming from confluent-kafka").

A consumer keeps, per assigned partition, the offset of the next record it returns (its
*position*). Positions start from ``assign()``'s or ``seek()``'s offset, else from the group's
committed offset (after ``subscribe()``), else from ``auto.offset.reset``. Fetches are stateless
on the broker side (no session or instance affinity); each partition's fetch goes to its leader
through the cluster client (:mod:`headwater.client.cluster`). A fetch that fails with a retriable
error (a 421, a leader that stops answering, a partition without a leader) returns nothing for
that partition in this round and holds it back for the delay the cluster client names, while the
other partitions go on being read. Fetched records wait in a per-partition buffer until
``poll()``/``consume()`` take them.

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
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from functools import partial

import httpx

from headwater.client.broker import BrokerClient, PartitionOffsets, TimestampOffset
from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.cluster_metadata import ClusterMetadata, describe_cluster
from headwater.config import ConsumerConfig
from headwater.errors import HeadwaterError, OffsetOutOfRangeError
from headwater.groups.client import DEFAULT_COORDINATOR, CoordinatorClient
from headwater.groups.consumer_group import ConsumerGroup, GroupCallback
from headwater.message import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Message,
    Origin,
    message_factory,
)
from headwater.records.batch import RecordFactory, TimestampType, decode_batch_as, iter_batches
from headwater.topic_partition import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    TopicPartition,
)
from headwater.types import Offset, PartitionId

log = logging.getLogger("headwater.consumer")

RebalanceCallback = Callable[["Consumer", list[TopicPartition]], None]
"""``on_assign(consumer, partitions)`` / ``on_revoke`` / ``on_lost``, as confluent-kafka's."""

# The longest single wait of poll()/consume() without a timeout: group changes are applied
# between waits, so a member that waits forever still follows rebalances.
_WAIT_SLICE_S = 1.0


class Consumer(Closeable):
    """Reads records from assigned partitions, in offset order per partition.

    Contract:

    * ``assign(partitions)`` replaces the assignment; a partition's ``offset`` (an offset, or
      ``OFFSET_BEGINNING``/``OFFSET_END``) sets where it starts, ``OFFSET_INVALID`` keeps its
      position (or leaves it to the committed offset / ``auto.offset.reset``).
      ``seek(TopicPartition(t, p, offset))`` moves an assigned partition; ``position(partitions)``
      tells the next offsets (resolving ``auto.offset.reset`` first if none is known yet).
    * ``poll(timeout)`` returns the next :class:`Message`, or ``None`` after ``timeout`` seconds
      without one; ``consume(num_messages, timeout)`` returns up to ``num_messages`` as soon as
      some are available (``[]`` on timeout). A ``timeout`` of ``None`` or ``-1`` waits forever.
    * When a position falls outside the log (retention deleted it, or a seek went past the end),
      ``auto.offset.reset`` ``earliest``/``latest`` moves it to the log start/end; ``none``
      raises ``OffsetOutOfRangeError``. Errors are raised as typed exceptions
      (``headwater.errors``), never returned as messages: ``Message.error()`` is always None.
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
        self._servers = ClusterClient.of_client(cfg, transport=transport)
        self._held_until: dict[TopicPartition, float] = {}  # partitions backing off after errors
        self._assignment: list[TopicPartition] = []
        self._paused: set[TopicPartition] = set()
        self._active: list[TopicPartition] = []  # assigned and not paused: what is fetched
        self._positions: dict[TopicPartition, Offset | None] = {}
        self._buffered: dict[TopicPartition, deque[Message]] = {}
        self._round_robin = 0
        # One factory per partition and timestamp type: the records of a batch share them.
        self._factories: dict[tuple[TopicPartition, bool], RecordFactory[Message]] = {}
        self._closed = False
        self._group: ConsumerGroup | None = None  # set by subscribe() (consumer groups)
        self._offsets_client: CoordinatorClient | None = None  # committed() without subscribe()

    # -- assignment and positions -------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions. Each starts at its ``offset`` when it carries one
        (``OFFSET_BEGINNING``, ``OFFSET_END`` or an offset); partitions kept keep their
        position otherwise."""
        given = list(partitions)
        new = list(dict.fromkeys(TopicPartition(tp.topic, tp.partition) for tp in given))
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._buffered = {tp: self._buffered.get(tp, deque()) for tp in new}
        self._assignment = new
        self._paused &= set(new)
        self._active = [tp for tp in new if tp not in self._paused]
        for tp in given:
            if tp.offset >= 0 or tp.offset in (OFFSET_BEGINNING, OFFSET_END):
                self.seek(tp)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def unassign(self) -> None:
        """Read nothing (``assign([])``)."""
        self.assign([])

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment (with their offsets, as ``assign``)."""
        self.assign([*self._assignment, *partitions])

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Remove ``partitions`` from the assignment."""
        gone = {TopicPartition(tp.topic, tp.partition) for tp in partitions}
        self.assign([tp for tp in self._assignment if tp not in gone])

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning and fetching ``partitions`` (they stay assigned, positions kept)."""
        for tp in partitions:
            self._require_assigned(TopicPartition(tp.topic, tp.partition))
            self._paused.add(TopicPartition(tp.topic, tp.partition))
        self._active = [tp for tp in self._assignment if tp not in self._paused]

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Return and fetch ``partitions`` again."""
        for tp in partitions:
            self._paused.discard(TopicPartition(tp.topic, tp.partition))
        self._active = [tp for tp in self._assignment if tp not in self._paused]

    def seek(self, partition: TopicPartition) -> None:
        """The next records of ``partition`` (assigned) start at ``partition.offset``: an
        offset, ``OFFSET_BEGINNING`` or ``OFFSET_END``."""
        tp = TopicPartition(partition.topic, partition.partition)
        self._require_assigned(tp)
        offset = partition.offset
        if offset == OFFSET_BEGINNING:
            offset = self._offsets(tp).beginning_offset
        elif offset == OFFSET_END:
            offset = self._offsets(tp).end_offset
        elif offset < 0:
            raise ValueError(
                f"seek({tp}) needs an offset >= 0, OFFSET_BEGINNING or OFFSET_END, got {offset}"
            )
        self._positions[tp] = Offset(offset)
        self._buffered[tp].clear()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Headwater's shorthand: ``seek()`` each partition (default: all) to its log start."""
        for tp in self._assignment if partitions is None else partitions:
            self.seek(TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING))

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Headwater's shorthand: ``seek()`` each partition (default: all) to its log end."""
        for tp in self._assignment if partitions is None else partitions:
            self.seek(TopicPartition(tp.topic, tp.partition, OFFSET_END))

    def _offsets(self, tp: TopicPartition) -> PartitionOffsets:
        """``tp``'s log start and end from its leader, retried up to ``request.timeout.ms``."""
        return self._servers.call_leader(
            tp.topic, tp.partition, lambda broker: broker.offsets(tp.topic, tp.partition)
        )

    def position(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Each (assigned) partition with ``offset`` set to the next offset it returns."""
        return [TopicPartition(tp.topic, tp.partition, self._position(tp)) for tp in partitions]

    def _position(self, partition: TopicPartition) -> Offset:
        tp = TopicPartition(partition.topic, partition.partition)
        self._require_assigned(tp)
        buffered = self._buffered[tp]
        if buffered:
            return buffered[0].offset()
        return self._fetch_position(tp)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """``(low, high)``: the partition's log start and end (the next offset to be written).
        ``timeout`` and ``cached`` are accepted for confluent-kafka's sake; each request is
        bounded by ``request.timeout.ms``."""
        offsets = self._offsets(TopicPartition(partition.topic, partition.partition))
        return offsets.beginning_offset, offsets.end_offset

    def offsets_for_times(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """For each partition, whose ``offset`` holds a timestamp (ms), the earliest offset
        whose record's timestamp is at or after it; ``OFFSET_END`` (-1) where there is none."""
        out = []
        for tp in partitions:
            found = self._servers.call_leader(
                tp.topic,
                tp.partition,
                partial(_offset_for_timestamp, tp.topic, tp.partition, tp.offset),
            )
            offset = OFFSET_END if found.offset is None else found.offset
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's topics (or just ``topic``) with their partitions; see
        :func:`headwater.cluster_metadata.describe_cluster`."""
        return describe_cluster(self._servers, topic)

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
        """Hook at the start of every poll; groups heartbeat and auto-commit here."""
        if self._group is not None:
            self._group.before_poll()

    # -- polling ------------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (``None``/``-1``: forever) for
        one; ``None`` if none came."""
        messages = self._poll_messages(1, timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` messages (1 to 1,000,000), as soon as some are available,
        waiting up to ``timeout`` seconds (``None``/``-1``: forever); ``[]`` on timeout."""
        if not 1 <= num_messages <= 1_000_000:
            raise ValueError(f"num_messages must be between 1 and 1000000, got {num_messages}")
        return self._poll_messages(num_messages, timeout)

    def _poll_messages(self, limit: int, timeout: float | None) -> list[Message]:
        if self._closed:
            raise RuntimeError("poll() on a closed consumer")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            wait = _WAIT_SLICE_S
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0.0))
            messages = self._poll_once(limit, wait)
            if messages or (deadline is not None and time.monotonic() >= deadline):
                return messages

    def _poll_once(self, limit: int, timeout: float) -> list[Message]:
        """Up to ``limit`` messages, waiting up to ``timeout`` seconds for some."""
        self._before_poll()
        if not self._active:
            time.sleep(timeout)
            return []
        deadline = time.monotonic() + timeout
        out = self._take_buffered(limit)
        if out:
            return out
        wait_ms = 0
        # Fetch rounds read ahead up to max.poll.records records (or ``limit``, if larger).
        read_ahead = max(limit, self.config.max_poll_records)
        while True:
            fetched_any = False
            for tp in self._rotation():
                if self._held_until.get(tp, 0.0) > time.monotonic():
                    continue
                fetched_any = True
                self._buffered[tp].extend(self._fetch_partition(tp, wait_ms))
                if sum(len(b) for b in self._buffered.values()) >= read_ahead:
                    break
            out = self._take_buffered(limit)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if out or remaining_ms <= 0:
                return out
            if not fetched_any:
                # Every partition is backing off after an error: wait for the first to be due.
                due = min(self._held_until.get(tp, 0.0) for tp in self._assignment)
                time.sleep(max(0.0, min(due, deadline) - time.monotonic()))
                continue
            # Nothing yet: long-poll, sharing the wait between partitions (fetch is per partition).
            wait_ms = max(min(remaining_ms, self.config.fetch_max_wait_ms) // len(self._active), 1)

    def _rotation(self) -> list[TopicPartition]:
        """Partitions fetched (assigned, not paused) starting after the last one served, so none
        starves."""
        n = len(self._active)
        start = self._round_robin % n
        self._round_robin += 1
        return list(itertools.islice(itertools.cycle(self._active), start, start + n))

    def _take_buffered(self, limit: int) -> list[Message]:
        out: list[Message] = []
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

    def _fetch_partition(self, tp: TopicPartition, max_wait_ms: int) -> list[Message]:
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
        records: list[Message] = []
        data = fetched.data
        next_position = position
        for pos, header in iter_batches(data, verify_crc=False):
            if header.last_offset < position:
                continue
            next_position = Offset(max(next_position, header.last_offset + 1))
            if header.is_control:
                continue
            # Records are built as Messages directly (one object each, not two).
            make = self._factory(tp, header.timestamp_type != TimestampType.CREATE_TIME)
            decoded = decode_batch_as(data, pos, make)[1]
            if header.base_offset < position:
                decoded = [r for r in decoded if r.offset() >= position]
            records.extend(decoded)
        self._positions[tp] = Offset(next_position)
        return records

    def _factory(self, tp: TopicPartition, log_append_time: bool) -> RecordFactory[Message]:
        make = self._factories.get((tp, log_append_time))
        if make is None:
            kind = TIMESTAMP_LOG_APPEND_TIME if log_append_time else TIMESTAMP_CREATE_TIME
            make = message_factory(Origin(tp.topic, PartitionId(tp.partition), kind))
            self._factories[(tp, log_append_time)] = make
        return make

    # -- consumer groups (headwater.groups; needs group.id and a coordinator) -----------------

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
        *,
        instance_id: str | None = None,
    ) -> None:
        """Join ``group.id`` for ``topics``; the coordinator at ``coordinator.url`` assigns.

        A background thread heartbeats; assignment changes are applied at the start of
        ``poll()``/``consume()``, which call ``on_revoke(consumer, partitions)`` (after
        committing the revoked partitions with ``enable.auto.commit``) and
        ``on_assign(consumer, partitions)`` with the partitions that changed; ``on_lost``
        (else ``on_revoke``) when the member was fenced and its partitions may already be
        another's. Assigned partitions start at the committed offset, else at
        ``auto.offset.reset``; ``on_assign`` may ``assign()`` them with offsets of its own.
        With ``instance_id`` (Headwater's; Kafka's ``group.instance.id``) the member is static:
        it may restart within its session timeout and get its partitions back without a
        rebalance. Topics are names; confluent-kafka's ``^regex`` subscriptions are not
        supported.
        """
        if self._group is None:
            self._group = ConsumerGroup(self, self.config)
        self._group.subscribe(
            topics,
            self._bind(on_assign),
            self._bind(on_revoke),
            self._bind(on_lost),
            instance_id,
        )

    def _bind(self, callback: RebalanceCallback | None) -> GroupCallback | None:
        if callback is None:
            return None
        return lambda partitions: callback(self, partitions)

    def unsubscribe(self) -> None:
        """Leave the group (committing first with ``enable.auto.commit``); nothing is assigned
        afterwards."""
        if self._group is not None:
            self._group.close()
            self._group = None
        self.assign([])

    def commit(
        self,
        message: Message | None = None,
        offsets: Iterable[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | Future[None] | None:
        """Commit the group's offsets: past ``message``, or ``offsets`` (each partition's
        ``offset`` is the next one to read), or by default every assigned partition's position.

        Asynchronous by default, as confluent-kafka's: returns a ``Future`` (Headwater's
        addition; a failure is also logged). ``asynchronous=False`` waits and returns the
        committed partitions, or raises the coordinator's error (e.g. ``UnknownMemberError``
        for a member that was expired). Only the partitions' current owner at its current
        epoch may commit."""
        if self._group is None:
            raise RuntimeError("commit() needs group.id and subscribe()")
        chosen: dict[TopicPartition, int]
        if message is not None and offsets is not None:
            raise ValueError("commit() takes message or offsets, not both")
        if message is not None:
            chosen = {TopicPartition(message.topic(), message.partition()): message.offset() + 1}
        elif offsets is not None:
            chosen = {}
            for tp in offsets:
                if tp.offset < 0:
                    raise ValueError(f"commit() needs an offset >= 0 for {tp}, got {tp.offset}")
                chosen[TopicPartition(tp.topic, tp.partition)] = tp.offset
        else:
            chosen = dict(self.committable_positions())
        future = self._group.commit(chosen, asynchronous)
        if future is not None:
            future.add_done_callback(_log_failed_commit)
            return future
        return [TopicPartition(tp.topic, tp.partition, o) for tp, o in sorted(chosen.items())]

    def committed(
        self, partitions: Iterable[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """``partitions``, each with ``offset`` set to the group's committed offset
        (``OFFSET_INVALID`` where none is). Needs ``group.id``, not ``subscribe()``."""
        group_id = self.config.group_id
        if not group_id:
            raise RuntimeError("committed() needs group.id")
        if self._group is not None:
            client = self._group.client
        else:
            if self._offsets_client is None:
                self._offsets_client = CoordinatorClient(
                    self.config.coordinator_url or DEFAULT_COORDINATOR,
                    timeout=self.config.request_timeout_ms / 1000,
                    ssl_context=self.config.ssl_context(),
                )
            client = self._offsets_client
        stored = client.committed(group_id)
        return [
            TopicPartition(tp.topic, tp.partition, stored.get(tp, OFFSET_INVALID))
            for tp in partitions
        ]

    def committable_positions(self) -> dict[TopicPartition, Offset]:
        """The position of each assigned partition that has one: what ``commit()`` stores by
        default (the next offset ``poll()`` returns, buffered records included)."""
        out: dict[TopicPartition, Offset] = {}
        for tp in self._assignment:
            buffered = self._buffered.get(tp)
            position = buffered[0].offset() if buffered else self._positions.get(tp)
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
        if self._offsets_client is not None:
            self._offsets_client.close()
        self._servers.close()


def _log_failed_commit(future: Future[None]) -> None:
    exc = future.exception()
    if exc is not None:
        log.warning("asynchronous commit failed: %s", exc)


def _offset_for_timestamp(
    topic: str, partition: int, timestamp: int, broker: BrokerClient
) -> TimestampOffset:
    return broker.offset_for_timestamp(topic, partition, timestamp)
