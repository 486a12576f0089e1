"""Issued idempotent-producer ids and their epochs, durable in ``<data_dir>/producers.json``.

File layout (JSON, replaced atomically and fsynced on every issue or epoch bump)::

    {"next_id": 7, "producers": {"<id>": [epoch, last_used_ms], ...}}

``next_id`` only grows, so an id is never issued twice -- not after a restart, not after the id
expired (unused for ``BROKER_PRODUCER_ID_EXPIRATION_MS``). Bumping the epoch fences every older
instance of the same producer id: their batches get InvalidProducerEpochError.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from headwater.errors import InvalidProducerEpochError, UnknownProducerIdError
from headwater.types import ProducerEpoch, ProducerId

MAX_EPOCH = 2**15 - 1  # epochs are int16 in the batch header


class ProducerRegistry:
    """Producer ids this broker issued, with each one's current epoch and last use."""

    def __init__(self, path: Path, expiration_ms: int) -> None:
        self.path = path
        self.expiration_ms = expiration_ms
        self.next_id = 0
        self.producers: dict[int, list[int]] = {}  # id -> [epoch, last_used_ms]

    def load(self) -> None:
        try:
            body = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return
        self.next_id = int(body["next_id"])
        self.producers = {int(k): [int(v[0]), int(v[1])] for k, v in body["producers"].items()}

    def save(self) -> None:
        producers = {str(k): v for k, v in self.producers.items()}
        body = {"next_id": self.next_id, "producers": producers}
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(body))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def init_producer(
        self, producer_id: int | None, epoch: int | None, now_ms: int
    ) -> tuple[ProducerId, ProducerEpoch]:
        """Issue a new id (epoch 0), or bump the epoch of ``producer_id`` if ``epoch`` is current.

        An exhausted epoch gets a fresh id, as Kafka does.
        """
        if producer_id is None:
            return self._issue(now_ms)
        current = self.producers.get(producer_id)
        if current is None:
            raise UnknownProducerIdError(
                f"Unknown producer id {producer_id}: never issued by this broker, or expired"
            )
        if epoch is None or epoch != current[0]:
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is not the current epoch {current[0]}: "
                "another instance has taken over this producer id"
            )
        if current[0] >= MAX_EPOCH:
            del self.producers[producer_id]
            return self._issue(now_ms)
        current[0] += 1
        current[1] = now_ms
        self.save()
        return ProducerId(producer_id), ProducerEpoch(current[0])

    def _issue(self, now_ms: int) -> tuple[ProducerId, ProducerEpoch]:
        producer_id = self.next_id
        self.next_id += 1
        self.producers[producer_id] = [0, now_ms]
        self.save()  # durable before anyone can use the id: never issued twice
        return ProducerId(producer_id), ProducerEpoch(0)

    def check(self, producer_id: int, epoch: int) -> None:
        """Raise unless ``producer_id`` is live and ``epoch`` is its current epoch."""
        current = self.producers.get(producer_id)
        if current is None:
            raise UnknownProducerIdError(
                f"Unknown producer id {producer_id}: never issued by this broker, or expired "
                f"after {self.expiration_ms} ms without use; get a new one from POST /producers"
            )
        if epoch != current[0]:
            older = "older than" if epoch < current[0] else "not"
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is {older} the current epoch "
                f"{current[0]}: this producer has been fenced"
            )

    def touch(self, producer_id: int, now_ms: int) -> None:
        current = self.producers.get(producer_id)
        if current is not None and now_ms > current[1]:
            current[1] = now_ms

    def expire(self, now_ms: int) -> list[int]:
        """Forget ids unused for longer than the expiration; return them."""
        limit = self.expiration_ms
        gone = [pid for pid, (_e, used) in self.producers.items() if now_ms - used > limit]
        for pid in gone:
            del self.producers[pid]
        return gone
