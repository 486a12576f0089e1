"""``Message``: one record as the consumer returns it and delivery callbacks receive it.

Its accessors are confluent-kafka's ``Message`` methods (``topic()``, ``partition()``,
``offset()``, ``timestamp()`` -> ``(type, ms)``, ``key()``, ``value()``, ``headers()``,
``error()``, ``len()``), so code written against confluent-kafka reads Headwater's records
unchanged. The consumer builds one per record, so the record's own fields are slots and what
records of one batch share (topic, partition, timestamp type, error) is one :class:`Origin`.
"""

from __future__ import annotations

from typing import NamedTuple

from headwater.records.batch import RecordFactory
from headwater.topic_partition import OFFSET_INVALID
from headwater.types import Offset, PartitionId, TimestampMs

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

Headers = list[tuple[str, bytes | None]]


class Origin(NamedTuple):
    """What the records of one fetched batch (or one delivery report) share."""

    topic: str
    partition: PartitionId
    timestamp_type: int = TIMESTAMP_CREATE_TIME
    error: BaseException | None = None


class Message:
    """One record: where it is stored, when, its key, value and headers, or an error.

    ``timestamp()`` is ``(TIMESTAMP_CREATE_TIME, ms)`` for the producer's time,
    ``(TIMESTAMP_LOG_APPEND_TIME, ms)`` when the topic stamps records as the broker appends
    them, ``(TIMESTAMP_NOT_AVAILABLE, -1)`` without one. ``headers()`` is ``None`` when the
    record has none. ``error()`` is ``None`` for consumed records (the consumer raises typed
    errors instead); in a delivery report it is the exception the produce failed with.
    """

    __slots__ = ("_headers", "_key", "_offset", "_origin", "_timestamp", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int = OFFSET_INVALID,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        error: BaseException | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, -1),
    ) -> None:
        """confluent-kafka's constructor (for tests and delivery reports; the consumer builds
        its messages with :func:`message_factory`)."""
        kind, ms = timestamp
        self._origin = Origin(topic, PartitionId(partition), kind, error)
        self._offset = Offset(offset)
        self._timestamp = TimestampMs(ms)
        self._key = key
        self._value = value
        self._headers: Headers = headers if headers is not None else []

    def topic(self) -> str:
        return self._origin.topic

    def partition(self) -> PartitionId:
        return self._origin.partition

    def offset(self) -> Offset:
        return self._offset

    def timestamp(self) -> tuple[int, TimestampMs]:
        kind = self._origin.timestamp_type
        if self._timestamp < 0 or kind == TIMESTAMP_NOT_AVAILABLE:
            return TIMESTAMP_NOT_AVAILABLE, TimestampMs(-1)
        return kind, self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        return self._headers or None

    def error(self) -> BaseException | None:
        return self._origin.error

    def leader_epoch(self) -> int | None:
        """Not tracked per record yet: always ``None`` (as confluent-kafka without one)."""
        return None

    def latency(self) -> float | None:
        """Not measured: always ``None``."""
        return None

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def set_headers(self, headers: Headers) -> None:
        self._headers = headers

    def set_topic(self, topic: str) -> None:
        self._origin = self._origin._replace(topic=topic)

    def set_error(self, error: BaseException | None) -> None:
        self._origin = self._origin._replace(error=error)

    def __len__(self) -> int:
        """The value's length in bytes (0 for a null value), as confluent-kafka's."""
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic()!r}, partition={self.partition()}, "
            f"offset={self._offset}, timestamp={self.timestamp()}, key={self._key!r}, "
            f"value={self._value!r})"
        )


def message_factory(origin: Origin) -> RecordFactory[Message]:
    """Builds the Messages of ``origin``'s batches for ``decode_batch_as``.

    ``Message.__init__`` costs about as much as the rest of decoding a record; writing the
    slots through their member descriptors builds the same object at a third of the cost.
    """
    new = object.__new__
    slots = Message.__dict__
    set_origin = slots["_origin"].__set__
    set_offset = slots["_offset"].__set__
    set_timestamp = slots["_timestamp"].__set__
    set_key = slots["_key"].__set__
    set_value = slots["_value"].__set__
    set_headers = slots["_headers"].__set__

    def make(
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> Message:
        message: Message = new(Message)
        set_origin(message, origin)
        set_offset(message, offset)
        set_timestamp(message, timestamp)
        set_key(message, key)
        set_value(message, value)
        set_headers(message, headers)
        return message

    return make
