"""REST produce's ``Idempotency-Key``: a retried request is answered with the first one's offsets.

REST Proxy v2 has no idempotent producer, so a client that retries a produce whose answer it
never saw (a relay that broke after the leader appended, a 504) may store its records twice. A
request that carries a key is written as an idempotent producer writes: each partition's
records as one batch of the producer id derived from the key, epoch 0, sequence 0. A retry with
the same key -- at any broker, after a failover -- derives the same id and sequence, so the
partition's producer state, rebuilt by every replica from the batches it copies, recognises it
and answers the stored offsets (``AppendResult.duplicate``). Unkeyed records of such a request
go to the partition the key picks rather than the sticky one, so a retry goes there too.

Derived ids have bit 62 set: ids the cluster issues count up from 0 and never get there, and a
raw-batch produce naming such an id is refused like any id the cluster never issued. A key is
remembered for ``BROKER_IDEMPOTENCY_KEY_WINDOW_MS`` after its last use.
"""

from __future__ import annotations

import hashlib

from headwater.errors import InvalidRequestError

HEADER = "Idempotency-Key"
KEYED_BIT = 1 << 62
MAX_KEY_LENGTH = 255


def validate(key: str) -> str:
    """The key if it is 1-255 visible ASCII characters, else 400 InvalidRequestError."""
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all(33 <= ord(c) <= 126 for c in key):
        raise InvalidRequestError(
            f"{HEADER} must be 1-{MAX_KEY_LENGTH} visible ASCII characters (no spaces), "
            f"got {key[:40]!r}"
        )
    return key


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode("ascii")).digest()[:8], "big")


def producer_id(key: str) -> int:
    """The producer id of a key's batches (bit 62 set; below 2**63, as ids are int64)."""
    return KEYED_BIT | (_digest(key) & (KEYED_BIT - 1))


def is_keyed(producer_id: int) -> bool:
    return producer_id >= KEYED_BIT


def partition_of(key: str, partitions: int) -> int:
    """The partition of a keyed request's unkeyed records: the same for every retry."""
    return _digest(key) % partitions
