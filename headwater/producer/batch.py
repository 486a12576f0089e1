"""One partition's batch in the producer, from its first record to its outcome.

While open, a batch keeps its records as columns: a batch of unkeyed, header-less records (the
common case) keeps only its values, so ``produce()`` allocates nothing per record that the
garbage collector tracks, and the encoder gets the values without taking tuples apart. Keys and
headers appear with the first record that has either, timestamps with the first record that
sets one. Once sent, the batch carries its outcome (offset or error), which its futures read and
its callbacks receive.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from headwater.types import Offset, PartitionId, ProducerEpoch, ProducerId, TimestampMs

log = logging.getLogger("headwater.producer")

RecordHeaders = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record was stored. ``offset`` is -1 with ``acks=0``."""

    topic: str
    partition: PartitionId
    offset: Offset
    timestamp: TimestampMs


DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]


class BatchSequence(NamedTuple):
    """The idempotence fields a batch is encoded with (all -1 without idempotence)."""

    producer_id: ProducerId
    producer_epoch: ProducerEpoch
    base_sequence: int


NO_SEQUENCE = BatchSequence(ProducerId(-1), ProducerEpoch(-1), -1)


class KeyedColumns:
    """The keys and headers columns of a batch, one entry per record."""

    __slots__ = ("headers", "keys")

    def __init__(self, records: int) -> None:
        # Records appended before the first keyed one had no key and no headers.
        self.keys: list[bytes | None] = [None] * records
        self.headers: list[RecordHeaders] = [()] * records


class ProducerBatch:
    """Records bound for one partition, from the first append until acknowledged or failed.

    Appends happen under the accumulator's lock; once sealed, only the sender touches it.
    """

    __slots__ = (
        "_waiters",
        "callback_indices",
        "callbacks",
        "created",
        "deadline",
        "done",
        "encoded",
        "error",
        "keyed",
        "log_append_time",
        "offset",
        "partition",
        "sealed",
        "sequence",
        "size",
        "timestamp",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(self, topic: str, partition: int, now: float, linger: float) -> None:
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keyed: KeyedColumns | None = None
        self.timestamps: list[int] | None = None
        self.size = 0  # bytes the records take, as counted against batch.size and buffer.memory
        self.sealed = False
        self.created = now
        self.deadline = now + linger
        self.timestamp = int(time.time() * 1000)
        # on_delivery callbacks and the index of the record each is for, appended side by side.
        self.callbacks: list[DeliveryCallback] = []
        self.callback_indices: list[int] = []
        self._waiters: list[Callable[[], None]] = []
        self.done = threading.Event()
        self.encoded: bytes | None = None
        self.sequence = NO_SEQUENCE
        self.error: BaseException | None = None
        self.offset = -1  # base offset once acknowledged (-1 with acks=0)
        self.log_append_time = -1

    # -- open: appending records --------------------------------------------------------------

    def keyed_columns(self) -> KeyedColumns:
        """The keys and headers columns, created for the records so far if not there yet; call
        before appending the next value."""
        keyed = self.keyed
        if keyed is None:
            keyed = self.keyed = KeyedColumns(len(self.values))
        return keyed

    # -- sent: the outcome --------------------------------------------------------------------

    def metadata(self, index: int) -> RecordMetadata:
        """Where record ``index`` was stored (call once the batch succeeded)."""
        offset = self.offset + index if self.offset >= 0 else -1
        if self.log_append_time >= 0:
            timestamp = self.log_append_time
        elif self.timestamps is not None:
            timestamp = self.timestamps[index]
        else:
            timestamp = self.timestamp
        return RecordMetadata(
            self.topic, PartitionId(self.partition), Offset(offset), TimestampMs(timestamp)
        )

    def add_waiter(self, waiter: Callable[[], None]) -> bool:
        """Run ``waiter()`` once the outcome is known; False (and not run) if it already is, so
        the caller runs what it wants itself."""
        self._waiters.append(waiter)
        # The batch may have completed between the append and here.
        if self.done.is_set():
            try:
                self._waiters.remove(waiter)
            except ValueError:
                return True  # the completing thread took it and runs it
            return False
        return True

    def notify(self) -> None:
        """Run the callbacks and waiters, after ``done`` is set (on a sender worker thread)."""
        error = self.error
        for index, callback in zip(self.callback_indices, self.callbacks, strict=True):
            try:
                callback(error, None if error else self.metadata(index))
            except Exception:
                log.exception("on_delivery callback failed")
        while self._waiters:
            try:
                waiter = self._waiters.pop()
            except IndexError:
                break
            try:
                waiter()
            except Exception:
                log.exception("delivery future callback failed")
