"""This broker's view of idempotent producers: each id's current epoch and last use.

Ids and epochs are issued cluster-wide (``cluster/producer_ids.py``: blocks of ids from the
metadata store, epochs bumped with compare-and-set there), so a producer may get its id at one
broker and write to partitions led by others. The registry caches what this broker has learnt
and tells the produce path when to ask the store:

* an epoch equal to the cached one is current (no store call on the hot path);
* an older epoch is fenced at once (epochs only grow);
* an unknown id, or a newer epoch than cached, is looked up in the store once.

Ids unused here for ``BROKER_PRODUCER_ID_EXPIRATION_MS`` are forgotten with their partition
state, as Kafka's ``producer.id.expiration.ms``; the store keeps the id, so a producer that comes
back is looked up again and is judged by its epoch there.
"""

from __future__ import annotations

from headwater.errors import InvalidProducerEpochError, UnknownProducerIdError
from headwater.types import ProducerEpoch, ProducerId

MAX_EPOCH = 2**15 - 1  # epochs are int16 in the batch header
UNKNOWN_EPOCH = -1


class ProducerRegistry:
    """Producer ids seen here: id -> [epoch (-1 = not looked up yet), last_used_ms]."""

    def __init__(self, expiration_ms: int) -> None:
        self.expiration_ms = expiration_ms
        self.producers: dict[int, list[int]] = {}

    def learn(self, producer_id: ProducerId, epoch: ProducerEpoch, now_ms: int) -> None:
        """Record an id and epoch the store issued or confirmed."""
        current = self.producers.get(producer_id)
        if current is None:
            self.producers[producer_id] = [epoch, now_ms]
        else:
            current[0] = max(current[0], epoch)
            current[1] = max(current[1], now_ms)

    def needs_lookup(self, producer_id: int, epoch: int) -> bool:
        """True when the store must be asked; raises when the epoch is known to be fenced."""
        current = self.producers.get(producer_id)
        if current is None or current[0] == UNKNOWN_EPOCH or epoch > current[0]:
            return True
        if epoch < current[0]:
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is older than the current epoch "
                f"{current[0]}: this producer has been fenced"
            )
        return False

    def judge(
        self, producer_id: int, epoch: int, stored: ProducerEpoch | None, now_ms: int
    ) -> None:
        """Judge a batch's epoch against the store's answer (None: the id was never issued)."""
        if stored is None:
            raise UnknownProducerIdError(
                f"Unknown producer id {producer_id}: never issued by this cluster, or expired "
                f"after {self.expiration_ms} ms without use; get a new one from POST /producers"
            )
        self.learn(ProducerId(producer_id), stored, now_ms)
        if epoch != stored:
            older = "older than" if epoch < stored else "not"
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is {older} the current epoch "
                f"{stored}: this producer has been fenced"
            )

    def touch(self, producer_id: int, now_ms: int) -> None:
        current = self.producers.get(producer_id)
        if current is None:
            # Known from a partition's state after a restart: its epoch is looked up when used.
            self.producers[producer_id] = [UNKNOWN_EPOCH, now_ms]
        elif now_ms > current[1]:
            current[1] = now_ms

    def expire(self, now_ms: int) -> list[int]:
        """Forget ids unused for longer than the expiration; return them."""
        limit = self.expiration_ms
        gone = [pid for pid, (_e, used) in self.producers.items() if now_ms - used > limit]
        for pid in gone:
            del self.producers[pid]
        return gone
