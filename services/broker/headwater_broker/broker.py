"""The broker's domain core: topics and their partition logs, produce, fetch, producers, upkeep.

Everything the HTTP routes do is one method here; nothing here (nor in ``log/``,
``topic_config.py``, ``producer_registry.py``, ``metrics.py``, ``settings.py``) imports FastAPI or
Starlette. Errors are the broker family's typed errors (``headwater.errors``); records arrive
decoded (:class:`RecordSource`, :class:`ProducerRecord`) or as raw RecordBatch v2 bytes.

Threading -- the one policy for the whole broker:

* **The event loop does everything but the steady fdatasync of appended bytes**: routes,
  validation, offset assignment, the ``pwritev`` of an append, every ``pread`` of a fetch,
  long-poll waits, retention, topic admin, and the rare syncs that must finish before the
  next step (a segment roll, the atomic rewrites of ``topics.json``, ``producers.json`` and
  ``log-start-offset``).
* **Worker threads (``asyncio.to_thread``) run only fdatasync of active segments**:
  ``PartitionLog._sync`` for ``BROKER_FSYNC=always`` and the ``interval`` task's pass over
  every partition. A sync may run while the loop appends to the same file: ``Segment.flush``
  clears its dirty flag first, so bytes written meanwhile are synced by the next one.
* **Appends to one partition are serialised** by ``PartitionLog.lock`` (an asyncio lock, held
  from judging producer sequences to the end of the write); retention, deletion and close take
  it too. Reads take no lock: they copy bytes below the high watermark, and segments are only
  deleted on the loop with no await between finding a segment and reading it.
* **fsync=always is a group commit**: an append is written under the lock, then waits outside
  it for one fdatasync per partition at a time; appends that arrive meanwhile are written and
  share the next one. The high watermark -- what fetches see -- moves only past synced bytes,
  and the producer is answered then. With ``interval`` and ``never`` it moves at the write.

Durable state under ``BROKER_DATA_DIR``::

    topics.json          topic catalog: {"topics": {name: {"partitions", "replication_factor",
                         "configs": {overrides}}}}, replaced atomically on every change
    producers.json       issued producer ids and epochs (producer_registry.py)
    <topic>-<p>/         one directory per partition (layout in log/segment.py)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import orjson

from headwater.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidReplicationFactorError,
    PartitionNotFoundError,
    RecordTooLargeError,
    ServiceUnavailableError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)
from headwater.records.batch import (
    Record,
    RecordTuple,
    decode_batch,
    encode_batch,
    iter_batches,
)
from headwater.records.partitioner import StickyPartitioner, partition_for_key
from headwater.records.validation import validate_records
from headwater.types import BrokerId, Offset, PartitionId, ProducerEpoch, ProducerId, TimestampMs
from headwater_broker import metrics
from headwater_broker.log.partition import (
    AppendResult,
    FetchData,
    PartitionLog,
    fsync_directory,
    partition_dir_name,
)
from headwater_broker.producer_registry import ProducerRegistry
from headwater_broker.settings import BrokerSettings
from headwater_broker.topic_config import (
    RULES,
    TopicConfig,
    effective_configs,
    validate_configs,
    validate_topic_name,
)

log = logging.getLogger("headwater.broker")

MAX_PARTITIONS = 10_000


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """One record to produce: the partition asked for (None: the broker picks), key, value."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordSource(Protocol):
    """The records of one produce request, decoded when :meth:`Broker.produce` asks.

    The broker checks the topic first, so what is wrong with the topic is reported before what
    is wrong with the body (``headwater_broker.api.embedded.ProduceBody`` is the REST one).
    """

    def decode(self) -> list[ProducerRecord]: ...


class ProducedOffset(NamedTuple):
    """Where one produced record landed."""

    partition: PartitionId
    offset: Offset


@dataclass(frozen=True)
class ReplicaInfo:
    broker: BrokerId
    leader: bool
    in_sync: bool


@dataclass(frozen=True)
class PartitionInfo:
    partition: PartitionId
    leader: BrokerId
    replicas: list[ReplicaInfo]
    beginning_offset: Offset
    end_offset: Offset


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]


@dataclass(frozen=True)
class RecordsFetch:
    """Decoded records at offsets >= the requested one, and the partition's bounds."""

    records: list[Record]
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


@dataclass
class _Topic:
    name: str
    replication_factor: int
    overrides: dict[str, str]
    config: TopicConfig
    partition_count: int
    partitions: list[PartitionLog] = field(default_factory=list)


class Broker:
    """One broker's topics and logs. ``open()`` recovers them; ``start()`` runs upkeep tasks."""

    def __init__(self, settings: BrokerSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.broker_id = BrokerId(settings.id)
        self.data_dir = settings.data_path
        self.clock = clock
        self.topics: dict[str, _Topic] = {}
        self.producer_ids = ProducerRegistry(
            self.data_dir / "producers.json", settings.producer_id_expiration_ms
        )
        self._sticky = StickyPartitioner()
        self._tasks: list[asyncio.Task[None]] = []
        self.is_open = False

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Load the catalog and recover every partition (cuts torn tails, rebuilds state)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.data_dir.glob("*.deleted"):
            shutil.rmtree(leftover, ignore_errors=True)
        self.producer_ids.load()
        catalog_path = self.data_dir / "topics.json"
        catalog = orjson.loads(catalog_path.read_bytes()) if catalog_path.exists() else {}
        for name, entry in catalog.get("topics", {}).items():
            overrides = {str(k): str(v) for k, v in entry.get("configs", {}).items()}
            topic = _Topic(
                name,
                int(entry.get("replication_factor", 1)),
                overrides,
                TopicConfig.from_overrides(overrides),
                int(entry["partitions"]),
            )
            for p in range(topic.partition_count):
                topic.partitions.append(self._open_partition(topic, p))
            self.topics[name] = topic
        now = self.now_ms()
        for topic in self.topics.values():
            for plog in topic.partitions:
                for pid, entry in plog.producers.entries.items():
                    self.producer_ids.touch(pid, min(entry.last_timestamp, now))
        self.is_open = True

    def _open_partition(self, topic: _Topic, p: int) -> PartitionLog:
        plog = PartitionLog.open(
            self.data_dir / partition_dir_name(topic.name, p),
            topic.name,
            PartitionId(p),
            topic.config,
            self.settings.fsync,
        )
        self._update_offset_metrics(plog)
        return plog

    async def start(self) -> None:
        """Start retention (and the interval fsync) in the background."""
        self._tasks.append(asyncio.create_task(self._upkeep_loop()))
        if self.settings.fsync == "interval":
            self._tasks.append(asyncio.create_task(self._fsync_loop()))

    async def close(self) -> None:
        """Stop background work and close every partition cleanly."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        self.is_open = False
        for topic in self.topics.values():
            for plog in topic.partitions:
                async with plog.lock:
                    plog.close()
        with contextlib.suppress(OSError):
            self.producer_ids.save()

    async def _upkeep_loop(self) -> None:
        interval = self.settings.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.enforce_retention()
                self.expire_producers()
            except Exception:
                log.exception("retention run failed")

    async def _fsync_loop(self) -> None:
        interval = self.settings.fsync_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(_flush_all, self.all_partitions())

    def all_partitions(self) -> list[PartitionLog]:
        return [plog for topic in self.topics.values() for plog in topic.partitions]

    async def enforce_retention(self) -> int:
        """Apply every topic's retention now; return how many segments were deleted."""
        deleted = 0
        now = self.now_ms()
        for plog in self.all_partitions():
            deleted += await plog.enforce_retention(now)
            self._update_offset_metrics(plog)
        return deleted

    def expire_producers(self) -> list[int]:
        """Forget producer ids idle past BROKER_PRODUCER_ID_EXPIRATION_MS (and their state)."""
        now = self.now_ms()
        gone = self.producer_ids.expire(now)
        live = set(self.producer_ids.producers)
        for plog in self.all_partitions():
            plog.producers.expire(now, self.settings.producer_id_expiration_ms, live)
        self.producer_ids.save()
        return gone

    def ready(self) -> tuple[bool, dict[str, Any]]:
        return self.is_open, {"topics": len(self.topics), "data_dir": str(self.data_dir)}

    # --- topics ------------------------------------------------------------------------------

    def _save_catalog(self) -> None:
        body = {
            "topics": {
                t.name: {
                    "partitions": t.partition_count,
                    "replication_factor": t.replication_factor,
                    "configs": t.overrides,
                }
                for t in self.topics.values()
            }
        }
        path = self.data_dir / "topics.json"
        tmp = path.with_name("topics.json.tmp")
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(body))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(self.data_dir)

    def _topic(self, name: str) -> _Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicNotFoundError(f"Topic not found. There is no topic '{name}'.")
        return topic

    def partition(self, topic_name: str, partition: int) -> PartitionLog:
        topic = self._topic(topic_name)
        if not 0 <= partition < len(topic.partitions):
            raise PartitionNotFoundError(
                f"Partition not found. Topic '{topic_name}' has {len(topic.partitions)} "
                f"partition(s), 0..{len(topic.partitions) - 1}; asked for {partition}."
            )
        return topic.partitions[partition]

    def _writable(self, topic_name: str) -> _Topic:
        """The topic to produce to, created with defaults if auto-creation is on."""
        if not self.is_open:
            raise ServiceUnavailableError("The broker is not open")
        if topic_name not in self.topics and self.settings.auto_create_topics:
            self.create_topic(topic_name)
        return self._topic(topic_name)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, Any] | None = None,
    ) -> TopicDescription:
        """Create a topic after validating its name, partition count, replication and configs."""
        validate_topic_name(name)
        count = self.settings.default_partitions if partitions is None else partitions
        if not 1 <= count <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {count}"
            )
        replication = 1 if replication_factor in (None, -1) else replication_factor
        if replication != 1:
            raise InvalidReplicationFactorError(
                f"Replication factor {replication_factor} is not possible: this cluster has 1 "
                "broker (use 1, or -1 for the default)"
            )
        overrides = validate_configs(configs or {})
        if name in self.topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists")
        topic = _Topic(name, 1, overrides, TopicConfig.from_overrides(overrides), count)
        self.topics[name] = topic
        self._save_catalog()
        topic.partitions = [self._open_partition(topic, p) for p in range(count)]
        log.info("created topic %s with %d partition(s)", name, count)
        return self.describe_topic(name)

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def partition_info(self, topic_name: str, partition: int) -> PartitionInfo:
        plog = self.partition(topic_name, partition)
        me = self.broker_id
        return PartitionInfo(
            PartitionId(partition),
            me,
            [ReplicaInfo(me, True, True)],
            plog.log_start_offset,
            plog.high_watermark,
        )

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self._topic(name)
        return TopicDescription(
            name,
            [self.partition_info(name, p) for p in range(len(topic.partitions))],
            effective_configs(topic.overrides),
        )

    def list_partitions(self, name: str) -> list[PartitionInfo]:
        return self.describe_topic(name).partitions

    async def delete_topic(self, name: str) -> None:
        """Remove a topic and its data; a topic created later under the name starts at 0."""
        topic = self._topic(name)
        # The name stays taken until every directory is moved aside, so a create of the same
        # name meanwhile gets 40901 instead of reopening the old files.
        doomed = [await plog.delete() for plog in topic.partitions]
        if self.topics.get(name) is not topic:
            return  # a concurrent delete finished first
        del self.topics[name]
        self._save_catalog()
        for path in doomed:
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
        metrics.forget_topic(name, len(topic.partitions))
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow a topic to ``count`` partitions in total (never shrinks, as Kafka)."""
        topic = self._topic(name)
        current = len(topic.partitions)
        if count <= current:
            raise InvalidPartitionsError(
                f"Topic '{name}' has {current} partition(s); the new count must be larger, "
                f"got {count}"
            )
        if count > MAX_PARTITIONS:
            raise InvalidPartitionsError(f"At most {MAX_PARTITIONS} partitions, got {count}")
        topic.partition_count = count
        self._save_catalog()
        topic.partitions.extend(self._open_partition(topic, p) for p in range(current, count))
        return self.describe_topic(name)

    def alter_topic_configs(
        self, name: str, set_configs: dict[str, Any], delete: list[str]
    ) -> TopicDescription:
        """Set and delete config overrides of ``name`` at once (Kafka's incremental alter).

        A deleted key goes back to its default; deleting one that is not set is no change. The
        resulting overrides are validated as a create's are, so nothing changes unless all of
        it is valid. Storage takes the new values at once: retention at its next run, segment
        sizes at the next roll, the timestamp type at the next append.
        """
        topic = self._topic(name)
        both = sorted(set(set_configs) & set(delete))
        if both:
            raise InvalidConfigError(f"Config(s) {', '.join(both)} both set and deleted")
        unknown = sorted(key for key in delete if key not in RULES)
        if unknown:
            raise InvalidConfigError(
                f"Unknown topic config '{unknown[0]}'; supported: {', '.join(sorted(RULES))}"
            )
        merged = {k: v for k, v in topic.overrides.items() if k not in delete}
        overrides = validate_configs({**merged, **set_configs})
        if overrides != topic.overrides:
            topic.overrides = overrides
            topic.config = TopicConfig.from_overrides(overrides)
            self._save_catalog()
            for plog in topic.partitions:
                plog.config = topic.config
            log.info("altered configs of topic %s: %s", name, overrides)
        return self.describe_topic(name)

    # --- produce -----------------------------------------------------------------------------

    async def append_batches(
        self, topic_name: str, partition: int, body: bytearray
    ) -> list[AppendResult]:
        """Append one or more concatenated RecordBatch v2, validated whole before any is written."""
        topic = self._writable(topic_name)
        plog = self.partition(topic_name, partition)
        if not body:
            raise CorruptRecordError("Empty body: expected one or more RecordBatch v2")
        batches = list(iter_batches(body))
        limit = topic.config.max_message_bytes
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
                validate_records(body, pos, header)
            if header.producer_id >= 0:
                if header.base_sequence < 0:
                    raise InvalidRecordError(
                        f"Batch at position {pos} has producer id {header.producer_id} but no "
                        "base sequence"
                    )
                self.producer_ids.check(header.producer_id, header.producer_epoch)
            records += header.records_count
        now = self.now_ms()
        results = await plog.append(body, batches, now)
        for _pos, header in batches:
            if header.producer_id >= 0:
                self.producer_ids.touch(header.producer_id, now)
        metrics.PRODUCE_BYTES.labels(topic_name).inc(len(body))
        metrics.PRODUCE_RECORDS.labels(topic_name).inc(records)
        self._update_offset_metrics(plog)
        return results

    async def produce(
        self, topic_name: str, path_partition: int | None, source: RecordSource
    ) -> list[ProducedOffset]:
        """REST Proxy v2 produce: every record validated and encoded before any is appended.

        ``source`` is decoded once the topic (and ``path_partition``) are known to exist.
        Returns where each record landed, in request order.
        """
        topic = self._writable(topic_name)
        count = len(topic.partitions)
        if path_partition is not None:
            self.partition(topic_name, path_partition)
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
                self.partition(topic_name, partition)
            elif key is not None:
                partition = partition_for_key(key, count)
            else:
                size = len(value or b"")
                partition = self._sticky.partition(topic_name, count, size)
            by_partition.setdefault(partition, []).append((i, (key, value, record.headers)))
        now = self.now_ms()
        encoded: list[tuple[int, list[int], bytearray]] = []
        limit = topic.config.max_message_bytes
        for partition, items in by_partition.items():
            batch = bytearray(encode_batch([r for _i, r in items], timestamp_ms=now))
            if len(batch) > limit:
                raise RecordTooLargeError(
                    f"The records for partition {partition} encode to a {len(batch)}-byte batch; "
                    f"the topic's max.message.bytes is {limit}"
                )
            encoded.append((partition, [i for i, _r in items], batch))
        unset = ProducedOffset(PartitionId(0), Offset(0))
        offsets = [unset] * len(decoded)
        for partition, indexes, batch in encoded:
            (result,) = await self.append_batches(topic_name, partition, batch)
            for n, i in enumerate(indexes):
                offsets[i] = ProducedOffset(PartitionId(partition), Offset(result.base_offset + n))
        return offsets

    def init_producer(
        self, producer_id: int | None, epoch: int | None
    ) -> tuple[ProducerId, ProducerEpoch]:
        return self.producer_ids.init_producer(producer_id, epoch, self.now_ms())

    # --- fetch -------------------------------------------------------------------------------

    async def fetch(
        self, topic_name: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int
    ) -> FetchData:
        """Stored batches from ``offset``; at the end, wait up to ``max_wait_ms`` for data."""
        plog = self.partition(topic_name, partition)
        if offset < 0:
            raise InvalidOffsetError(f"Offset must be >= 0, got {offset}")
        if max_bytes < 1:
            raise InvalidOffsetError(f"max_bytes must be >= 1, got {max_bytes}")
        plog.check_offset(offset)
        if offset >= plog.high_watermark and max_wait_ms > 0:
            await plog.wait_for_data(offset, max_wait_ms / 1000)
            if plog.closed:
                self.partition(topic_name, partition)  # deleted while waiting: 40401
        data = plog.read(offset, max_bytes)
        if data.data:
            metrics.FETCH_BYTES.labels(topic_name).inc(len(data.data))
            metrics.FETCH_RECORDS.labels(topic_name).inc(data.records)
        return data

    async def fetch_records(
        self,
        topic_name: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        max_records: int | None,
    ) -> RecordsFetch:
        """Like :meth:`fetch`, decoded: records at offsets >= ``offset`` only."""
        if max_records is not None and max_records < 1:
            raise InvalidOffsetError(f"max_records must be >= 1, got {max_records}")
        data = await self.fetch(topic_name, partition, offset, max_bytes, max_wait_ms)
        records: list[Record] = []
        buf = data.data
        pos = 0
        while pos < len(buf) and (max_records is None or len(records) < max_records):
            header, batch_records = decode_batch(buf, pos)
            pos += header.size
            records.extend(r for r in batch_records if r.offset >= offset)
        next_offset = data.next_offset
        if max_records is not None and len(records) > max_records:
            del records[max_records:]
            next_offset = Offset(records[-1].offset + 1)
        return RecordsFetch(records, next_offset, data.high_watermark, data.log_start_offset)

    def offsets(self, topic_name: str, partition: int) -> tuple[Offset, Offset]:
        plog = self.partition(topic_name, partition)
        return plog.log_start_offset, plog.high_watermark

    def lookup_offset(
        self, topic_name: str, partition: int, timestamp: int
    ) -> tuple[Offset, TimestampMs] | None:
        """Earliest offset whose timestamp is >= ``timestamp`` (None when there is none)."""
        return self.partition(topic_name, partition).lookup_timestamp(timestamp)

    def _update_offset_metrics(self, plog: PartitionLog) -> None:
        labels = (plog.topic, str(plog.partition))
        metrics.LOG_END_OFFSET.labels(*labels).set(plog.log_end_offset)
        metrics.LOG_START_OFFSET.labels(*labels).set(plog.log_start_offset)


def _flush_all(logs: list[PartitionLog]) -> None:
    """fdatasync every partition's active segment (runs in a worker thread)."""
    for plog in logs:
        plog.flush()
