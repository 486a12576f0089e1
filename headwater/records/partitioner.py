"""Choosing a partition: Kafka's murmur2 for keyed records, the sticky partitioner for the rest."""

from __future__ import annotations

import random

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit MurmurHash2 of ``data`` (seed 0x9747b28c).

    Bit-identical to the Java client, so a key lands on the partition Kafka's clients choose.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    for i in range(0, blocks * 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    tail = blocks * 4
    # Java's switch falls through: 3 then 2 then 1 bytes mix in before the multiply.
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition of a keyed record: ``(murmur2(key) & 0x7fffffff) % num_partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Partitions for records without a key (KIP-480, uniform by bytes as in KIP-794).

    A topic sticks to one randomly chosen partition so its records fill one batch instead of
    spreading thin over all of them; after ``batch_size`` bytes have gone to that partition, or
    when the caller reports the batch complete, the next record switches to another partition
    (never the same one again when there is more than one). Not thread-safe: one per producer
    thread or guarded by the caller's lock.
    """

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None) -> None:
        self.batch_size = batch_size
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}
        self._bytes: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, record_size: int = 0) -> int:
        """The partition for the next unkeyed record of ``topic``; counts its ``record_size``."""
        current = self._current.get(topic)
        if current is None or current >= num_partitions:
            current = self._switch(topic, num_partitions, None)
        elif self._bytes[topic] >= self.batch_size:
            current = self._switch(topic, num_partitions, current)
        self._bytes[topic] += record_size
        return current

    def on_batch_complete(self, topic: str, num_partitions: int) -> None:
        """The sticky partition's batch was sent: the next record moves to another partition."""
        self._switch(topic, num_partitions, self._current.get(topic))

    def _switch(self, topic: str, num_partitions: int, previous: int | None) -> int:
        if num_partitions <= 1 or previous is None or previous >= num_partitions:
            chosen = self._rng.randrange(num_partitions)
        else:
            chosen = self._rng.randrange(num_partitions - 1)
            if chosen >= previous:
                chosen += 1
        self._current[topic] = chosen
        self._bytes[topic] = 0
        return chosen
