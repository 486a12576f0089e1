"""What ``produce()`` and ``produce_many()`` hand back: futures over their records' batches.

A future is one object per record, so it is deliberately tiny: it points at its batch and its
index there, and reads the batch's outcome (``ProducerBatch.done``, ``error``, ``metadata()``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from headwater.producer.batch import ProducerBatch, RecordMetadata


class DeliveryFuture:
    """The outcome of one ``produce()``: a small subset of ``concurrent.futures.Future``.

    ``result(timeout)`` blocks until the record's batch is acknowledged and returns its
    :class:`RecordMetadata`, or raises the delivery error (``TimeoutError`` if ``timeout``
    passes first).
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done.is_set()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout}s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.done.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout}s")
        return self._batch.error

    def add_done_callback(self, fn: Callable[[DeliveryFuture], None]) -> None:
        """Call ``fn(future)`` once delivered or failed (now, if that already happened)."""
        batch, index = self._batch, self._index
        # Called later, fn gets a new future for the same record (as it always has).
        if not batch.add_waiter(lambda: fn(DeliveryFuture(batch, index))):
            fn(self)


class BatchSlice(NamedTuple):
    """Consecutive records of one ``produce_many()`` call that went into one batch."""

    batch: ProducerBatch
    start: int  # index of the first of them in the batch
    length: int


class BulkDeliveryFuture:
    """The outcome of one ``produce_many()``: done when every one of its records is.

    ``result(timeout)`` returns the records' :class:`RecordMetadata` in the order given, or
    raises the first delivery error.
    """

    __slots__ = ("_order", "_slices")

    def __init__(self, slices: list[BatchSlice], order: list[int] | None = None) -> None:
        self._slices = slices
        # Records queued grouped by partition: order[i] is where the i-th given record is among
        # the slices' records. None when they were queued in the order given.
        self._order = order

    def done(self) -> bool:
        return all(piece.batch.done.is_set() for piece in self._slices)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first delivery error of the records, or None once all are stored: what
        ``result`` raises, without building a RecordMetadata per record."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch, _start, _length in self._slices:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not batch.done.wait(remaining):
                raise TimeoutError(f"records not acknowledged within {timeout}s")
            if batch.error is not None:
                return batch.error
        return None

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out: list[RecordMetadata] = []
        for batch, start, length in self._slices:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not batch.done.wait(remaining):
                raise TimeoutError(f"records not acknowledged within {timeout}s")
            if batch.error is not None:
                raise batch.error
            out.extend(batch.metadata(i) for i in range(start, start + length))
        if self._order is None:
            return out
        return [out[pos] for pos in self._order]
