"""The produce path: batches checked whole, then appended through the leader role, or refused.

Two doors share it: raw RecordBatch v2 bodies (:meth:`Appends.append_batches`, the SDK's and
the replica-independent path) and REST Proxy v2 records (:meth:`Appends.produce`, encoded into
one batch per partition here, relayed for partitions led elsewhere). Every append goes through
the partition's :class:`~headwater_broker.replication.leader.PartitionLeader` of the current
leader epoch, asked of :class:`~headwater_broker.routing.Routing` after the last await: a replica
this broker has stopped leading never takes a produce (docs/cluster.md, "Under faults").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple, Protocol

from headwater.errors import (
    CorruptRecordError,
    IdempotencyKeyConflictError,
    InvalidRecordError,
    InvalidRequestError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    ServiceUnavailableError,
    StorageError,
)
from headwater.records.batch import RecordTuple, encode_batch, iter_batches
from headwater.records.compression import DecompressedTooLargeError
from headwater.records.header import BatchHeader
from headwater.records.partitioner import StickyPartitioner, partition_for_key
from headwater.types import BrokerId, Offset, PartitionId, ProducerEpoch, ProducerId
from headwater_broker import idempotency, metrics
from headwater_broker.cluster import producer_ids
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.log.local_log import is_disk_failure
from headwater_broker.log.partition import AppendResult
from headwater_broker.partitions import update_offset_metrics
from headwater_broker.peers import Peers
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.routing import Routing
from headwater_broker.settings import BrokerSettings
from headwater_broker.topic_admin import TopicAdmin
from headwater_broker.topic_config import TopicConfig
from headwater_broker.validation.records import validate_records


class Acks(IntEnum):
    """What a produce waits for before it is answered (Kafka's ``acks``, same numbers).

    ``NONE`` (0): answered 204 once the leader has appended, promising nothing -- over HTTP the
    request still waits for its answer; ``LEADER`` (1): the leader's append (fsynced under
    ``BROKER_FSYNC=always``); ``ALL`` (-1): the high watermark passing the batch, with at least
    ``min.insync.replicas`` in sync.
    """

    NONE = 0
    LEADER = 1
    ALL = -1

    @classmethod
    def parse(cls, text: str) -> Acks:
        """``0``, ``1``, ``all`` or ``-1``; anything else is 422 42200."""
        level = {"0": cls.NONE, "1": cls.LEADER, "all": cls.ALL, "-1": cls.ALL}.get(text)
        if level is None:
            raise InvalidRequestError(f"acks must be 0, 1, all or -1, got {text!r}")
        return level


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """One record to produce: the partition asked for (None: the broker picks), key, value."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordSource(Protocol):
    """The records of one produce request, decoded when :meth:`Appends.produce` asks.

    The broker checks the topic first, so what is wrong with the topic is reported before what
    is wrong with the body (``headwater_broker.api.embedded.ProduceBody`` is the REST one).
    """

    def decode(self) -> list[ProducerRecord]: ...


class ProducedOffset(NamedTuple):
    """Where one produced record landed."""

    partition: PartitionId
    offset: Offset


def max_decompressed(settings: BrokerSettings, config: TopicConfig) -> int:
    """The most one compressed batch's records may decompress to in a topic.

    ``BROKER_MAX_DECOMPRESSED_BYTES``, or the topic's ``max.message.bytes`` where that is
    larger: a batch never stops being accepted for being sent compressed.
    """
    return max(settings.max_decompressed_bytes, config.max_message_bytes)


class Appends:
    """One broker's produce path (see the module docstring)."""

    def __init__(
        self,
        settings: BrokerSettings,
        routing: Routing,
        admin: TopicAdmin,
        peers: Peers,
        producers: ProducerRegistry,
        node: Callable[[], ClusterNode],
        now_ms: Callable[[], int],
        is_open: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.routing = routing
        self.admin = admin
        self.peers = peers
        self.producers = producers
        self._node = node
        self.now_ms = now_ms
        self._is_open = is_open
        self._sticky = StickyPartitioner()

    async def append_batches(
        self,
        topic_name: str,
        partition: int,
        body: bytearray,
        *,
        acks: Acks = Acks.LEADER,
        keyed_request: bool = False,
    ) -> list[AppendResult]:
        """Append one or more concatenated RecordBatch v2, validated whole before any is written.

        Only at the partition's leader (421 42101 elsewhere, 503 50302 when none leads it).
        ``Acks.ALL``: refused before appending when fewer replicas than
        ``min.insync.replicas`` are in sync (503 50303), answered once the high watermark passes
        the batches (503 50304 if the in-sync set shrank below the minimum meanwhile, 421 if
        leadership moved, 504 50401 after ``BROKER_REQUEST_TIMEOUT_MS``). ``keyed_request``:
        a REST produce with an ``Idempotency-Key`` (its batches' producer id is derived from the
        key, not issued by the cluster: see ``idempotency.py``).
        """
        await self._auto_create(topic_name)
        plog = await self.routing.leader_log(topic_name, partition)
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
        leader = self.routing.leader_role(topic_name, partition, plog)
        now = self.now_ms()
        timeout_s = self.settings.request_timeout_ms / 1000
        try:
            results = await leader.append(body, batches, now, acks=acks, timeout_s=timeout_s)
        except StorageError as exc:
            if is_disk_failure(exc):
                self._node().take_storage_offline(exc.message)
            raise
        for _pos, header in batches:
            if header.producer_id >= 0 and not idempotency.is_keyed(header.producer_id):
                self.producers.touch(header.producer_id, now)
        metrics.PRODUCE_BYTES.labels(topic_name).inc(len(body))
        metrics.PRODUCE_RECORDS.labels(topic_name).inc(records)
        update_offset_metrics(plog)
        return results

    def _validate(
        self, body: bytearray, pos: int, header: BatchHeader, config: TopicConfig
    ) -> None:
        cap = max_decompressed(self.settings, config)
        try:
            validate_records(
                body, pos, header, max_decompressed=cap, columnar=self.settings.validate_columnar
            )
        except DecompressedTooLargeError as exc:
            raise DecompressedTooLargeError(
                f"{exc.message} (BROKER_MAX_DECOMPRESSED_BYTES, or the topic's max.message.bytes "
                "when larger); nothing was appended"
            ) from None

    async def _check_producer(self, producer_id: int, epoch: int) -> None:
        if self.producers.needs_lookup(producer_id, epoch):
            store = self._node().store
            stored = await store.call(producer_ids.current_epoch, store, producer_id)
            self.producers.judge(producer_id, epoch, stored, self.now_ms())

    async def _auto_create(self, topic_name: str) -> None:
        if not self._is_open():
            raise ServiceUnavailableError(
                f"Broker {self.broker_id} is closing (shutting down, or another process took its "
                "id); nothing was written: retry"
            )
        await self.admin.auto_create(topic_name)

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
        routing = self.routing
        topic = routing.topic_state(topic_name)
        count = topic.partitions
        if path_partition is not None:
            routing.partition_state(topic_name, path_partition)
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
                routing.partition_state(topic_name, partition)
            elif key is not None:
                partition = partition_for_key(key, count)
            elif idempotency_key is not None:
                partition = idempotency.partition_of(idempotency_key, count)
            else:
                size = len(value or b"")
                partition = self._sticky.partition(topic_name, count, size)
            by_partition.setdefault(partition, []).append((i, (key, value, record.headers)))
        # Where each partition goes is settled before anything is appended.
        leaders = {p: await routing.find_leader(topic_name, p) for p in by_partition}
        if forwarded and any(url is not None for url in leaders.values()):
            p = next(p for p, url in leaders.items() if url is not None)
            raise routing.not_leader(topic_name, p)
        now = self.now_ms()
        # Each partition's records as one batch of the key's producer, epoch 0, sequence 0.
        pid = -1 if idempotency_key is None else idempotency.producer_id(idempotency_key)
        first = -1 if idempotency_key is None else 0
        encoded: list[tuple[int, list[int], bytearray]] = []
        limit = TopicConfig.from_overrides(topic.configs).max_message_bytes
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
                    topic_name, partition, batch, acks=Acks.ALL, keyed_request=pid >= 0
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
                routing.image.offset,
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
        pid, issued = await self._node().producer_ids.init_producer(producer_id, epoch)
        self.producers.learn(pid, issued, self.now_ms())
        return pid, issued
