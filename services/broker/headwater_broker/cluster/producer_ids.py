"""Idempotent-producer ids unique across the cluster, and their epochs (``producers`` table).

Ids come from ``cluster.next_producer_id`` in blocks (one atomic ``UPDATE ... RETURNING`` per
block), so two brokers never hand out the same id and a broker touches the database once per
block, not per producer. The ``producers`` row of an id holds its current epoch; bumping it is a
compare-and-set on the epoch the caller presented, so of two instances of one producer racing to
take over, exactly one wins and the other is fenced (``InvalidProducerEpochError``).
"""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from headwater.errors import InvalidProducerEpochError, UnknownProducerIdError
from headwater.types import ProducerEpoch, ProducerId
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.store import MetadataStore

MAX_EPOCH = 2**15 - 1  # epochs are int16 in the batch header


def allocate_block(store: MetadataStore, size: int) -> range:
    """Reserve ``size`` ids no other broker will ever get."""
    c = t.cluster.c
    with store.write() as conn:
        end = conn.execute(
            sa.update(t.cluster)
            .where(c.id == 1)
            .values(next_producer_id=c.next_producer_id + size)
            .returning(c.next_producer_id)
        ).scalar_one()
    return range(int(end) - size, int(end))


def issue(store: MetadataStore, producer_id: int) -> None:
    """Record a freshly allocated id at epoch 0."""
    with store.write() as conn:
        conn.execute(
            sa.insert(t.producers).values(producer_id=producer_id, epoch=0, last_used_ms=store.now)
        )


def bump_epoch(store: MetadataStore, producer_id: int, epoch: int) -> ProducerEpoch | None:
    """``epoch + 1`` if ``epoch`` is current; None when the epoch is exhausted (use a new id).

    Raises ``UnknownProducerIdError`` (never issued, or expired) or ``InvalidProducerEpochError``
    (another instance took the id over).
    """
    p = t.producers.c
    with store.write() as conn:
        current = conn.execute(sa.select(p.epoch).where(p.producer_id == producer_id)).scalar()
        if current is None:
            raise UnknownProducerIdError(
                f"Unknown producer id {producer_id}: never issued, or expired"
            )
        if current != epoch:
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} is not the current epoch {current}: "
                "another instance has taken over this producer id"
            )
        if current >= MAX_EPOCH:
            conn.execute(sa.delete(t.producers).where(p.producer_id == producer_id))
            return None
        bumped = conn.execute(
            sa.update(t.producers)
            .where(p.producer_id == producer_id, p.epoch == epoch)
            .values(epoch=p.epoch + 1, last_used_ms=store.now)
            .returning(p.epoch)
        ).scalar()
        if bumped is None:  # PostgreSQL: another bump committed between our read and update
            raise InvalidProducerEpochError(
                f"Producer {producer_id} epoch {epoch} was bumped by another instance meanwhile"
            )
        return ProducerEpoch(int(bumped))


def current_epoch(store: MetadataStore, producer_id: int) -> ProducerEpoch | None:
    with store.read() as conn:
        found = conn.execute(
            sa.select(t.producers.c.epoch).where(t.producers.c.producer_id == producer_id)
        ).scalar()
    return None if found is None else ProducerEpoch(int(found))


def touch(store: MetadataStore, producer_ids: list[int]) -> None:
    """Mark ids as used now (call with the ids seen since the last call, not per batch)."""
    if not producer_ids:
        return
    p = t.producers.c
    with store.write() as conn:
        conn.execute(
            sa.update(t.producers)
            .where(p.producer_id.in_(producer_ids))
            .values(last_used_ms=store.now)
        )


def expire(store: MetadataStore, unused_for_ms: int) -> int:
    """Forget ids unused for longer than ``unused_for_ms``; return how many."""
    with store.write() as conn:
        deleted = conn.execute(
            sa.delete(t.producers).where(t.producers.c.last_used_ms < store.now - unused_for_ms)
        )
        return int(deleted.rowcount)


class ProducerIds:
    """One broker's producer-id service: ids from its current block, epochs in the database."""

    def __init__(self, store: MetadataStore, block_size: int) -> None:
        self.store = store
        self.block_size = block_size
        self._block: range = range(0)
        self._next = 0
        self._lock = asyncio.Lock()

    async def _new_id(self) -> ProducerId:
        async with self._lock:
            if self._next >= len(self._block):
                self._block = await self.store.call(allocate_block, self.store, self.block_size)
                self._next = 0
            producer_id = self._block[self._next]
            self._next += 1
        await self.store.call(issue, self.store, producer_id)
        return ProducerId(producer_id)

    async def init_producer(
        self, producer_id: int | None, epoch: int | None
    ) -> tuple[ProducerId, ProducerEpoch]:
        """A new id at epoch 0, or ``producer_id`` with its epoch bumped if ``epoch`` is current.

        An exhausted epoch gets a fresh id, as Kafka does.
        """
        if producer_id is None:
            return await self._new_id(), ProducerEpoch(0)
        if epoch is None:
            raise InvalidProducerEpochError(
                f"Producer {producer_id}: the current epoch is needed to take the id over"
            )
        bumped = await self.store.call(bump_epoch, self.store, producer_id, epoch)
        if bumped is None:
            return await self._new_id(), ProducerEpoch(0)
        return ProducerId(producer_id), bumped
