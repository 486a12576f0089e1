"""A produce that waits while the broker stops leading its partition is refused, never appended.

The produce path awaits before it appends: a producer id this broker has not seen yet is looked
up in the metadata store. If the broker stops leading the partition meanwhile, the request must
be refused (421, or 503 50302 when nobody leads it) with nothing written: a batch written into a
replica the broker no longer leads is neither stamped with a leader epoch nor replicated, so it
would be answered and then cut by the next truncation -- an acknowledged record lost.

The pause is real: a PostgreSQL session holds an exclusive lock on the ``producers`` table, so
the broker's lookup waits in the database until the test commits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from headwater.records.batch import encode_batch
from headwater_broker.cluster import producer_ids
from headwater_broker.cluster.store import MetadataStore
from tests.integration.broker.in_process import BATCHES, broker_app
from tests.support import unique

pytestmark = [pytest.mark.anyio, pytest.mark.needs("postgres")]


def _waiting_on_lock(url: str) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            waiting = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
        return bool(waiting)
    finally:
        engine.dispose()


async def test_a_produce_whose_leadership_ends_during_its_producer_lookup_is_refused(
    tmp_path: Path, postgres_url: str
) -> None:
    async with broker_app(
        tmp_path, metadata_url=postgres_url, controller_lease_ms=10_000, session_timeout_ms=5000
    ) as (broker, client):
        topic = unique("race")
        assert (await client.post("/topics", json={"name": topic})).status_code == 201
        await broker.replicas_settled()
        # An id issued by another broker of the cluster: this one looks it up on first use.
        other = MetadataStore(postgres_url)
        try:
            pid = producer_ids.allocate_block(other, 1)[0]
            producer_ids.issue(other, pid)
        finally:
            other.close()
        body = encode_batch([(None, b"x", [])], producer_id=pid, producer_epoch=0, base_sequence=0)

        locker = sa.create_engine(postgres_url)
        conn = locker.connect()
        transaction = conn.begin()
        conn.execute(sa.text("LOCK TABLE producers IN ACCESS EXCLUSIVE MODE"))
        try:
            produce = asyncio.create_task(
                client.post(
                    f"/topics/{topic}/partitions/0/batches",
                    params={"acks": "all"},
                    content=body,
                    headers={"content-type": BATCHES},
                )
            )
            for _ in range(500):
                if await asyncio.to_thread(_waiting_on_lock, postgres_url):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the produce never waited on the producers table")
            # The broker stops leading while the lookup waits (a one-broker cluster: offline).
            await broker.controlled_shutdown()
            assert not broker.registry.leading()
        finally:
            transaction.commit()
            conn.close()
            locker.dispose()
        answer: httpx.Response = await produce
        assert answer.status_code == 503, answer.text
        assert answer.json()["error_code"] == 50302
        hosted = broker.registry.get(topic, 0)
        assert hosted is not None
        plog = hosted.log
        assert plog.log_end_offset == 0  # nothing written
        assert plog.producers.entries == {}
