"""Delivery reports: ``on_delivery`` callbacks queued by the sender, run by ``poll()``/``flush()``.

As in confluent-kafka, a delivery callback ``on_delivery(err, msg)`` runs on the thread that
calls ``Producer.poll()`` or ``flush()``, never on a producer thread: the sender only queues
the report (:meth:`DeliveryReports.arrived`, on a worker thread once the batch's outcome is
known). ``owed`` counts callbacks registered and not yet run, so ``flush()`` returns only after
every report of what it waited for was served.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial

from headwater.message import TIMESTAMP_CREATE_TIME, Headers, Message
from headwater.producer.batch import RecordMetadata

DeliveryReportCallback = Callable[[BaseException | None, Message], None]
"""``on_delivery(err, msg)``: ``err`` is None or the exception the record failed with; ``msg``
is the record with its partition, offset and timestamp (``msg.error()`` is ``err``)."""


class DeliveryReports:
    """Reports waiting to be served, and how many are still to come."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: deque[tuple[DeliveryReportCallback, Message]] = deque()
        self.owed = 0  # callbacks registered and not yet served

    def expect(
        self,
        callback: DeliveryReportCallback,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
    ) -> Callable[[BaseException | None, RecordMetadata | None], None]:
        """Count one report to come; the batch calls what this returns with its outcome."""
        with self._cond:
            self.owed += 1
        return partial(self.arrived, callback, topic, partition, key, value, headers)

    def arrived(
        self,
        callback: DeliveryReportCallback,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        error: BaseException | None,
        metadata: RecordMetadata | None,
    ) -> None:
        if metadata is None:
            message = Message(topic, partition, key=key, value=value, headers=headers, error=error)
        else:
            message = Message(
                topic,
                metadata.partition,
                metadata.offset,
                key,
                value,
                headers,
                timestamp=(TIMESTAMP_CREATE_TIME, metadata.timestamp),
            )
        with self._cond:
            self._ready.append((callback, message))
            self._cond.notify_all()

    def ready(self) -> int:
        """Reports that arrived and were not served yet."""
        return len(self._ready)

    def serve(self, timeout: float | None) -> int:
        """Run the reports that arrived, waiting up to ``timeout`` seconds (None: forever) for
        one if none has; how many ran. A callback's exception propagates to the caller (the
        reports after it stay queued for the next call)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._ready:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return 0
                self._cond.wait(remaining)
        served = 0
        while True:
            with self._cond:
                if not self._ready:
                    return served
                callback, message = self._ready.popleft()
                self.owed -= 1
            served += 1
            callback(message.error(), message)

    def drain(self, deadline: float | None) -> None:
        """Serve reports until none is owed, or ``deadline`` (``time.monotonic()``) passes."""
        while self.owed:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            self.serve(remaining)
