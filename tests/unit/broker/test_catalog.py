"""A broker's data directory: cluster identity, replica topic ids, strays, the pre-cluster import.

Each test runs a one-broker cluster on a SQLite file in ``tmp_path`` (no sockets).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from headwater.records.batch import encode_batch
from headwater_broker.broker import Broker
from headwater_broker.catalog import ClusterMismatchError, topic_id_of
from headwater_broker.settings import BrokerSettings
from headwater_kernel.clock import ManualClock


@asynccontextmanager
async def started(path: Path, **settings: Any) -> AsyncIterator[Broker]:
    broker = Broker(BrokerSettings(data_dir=str(path), **settings))
    broker.open()
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


def test_replica_directories_record_their_topic_id(tmp_path: Path) -> None:
    async def main() -> None:
        async with started(tmp_path) as broker:
            created = await broker.admin.create_topic("orders", 2, configs={"retention.ms": 60000})
            assert topic_id_of(tmp_path / "orders-0") == created.topic_id
            assert topic_id_of(tmp_path / "orders-1") == created.topic_id
        async with started(tmp_path) as again:
            described = await again.admin.describe_topic("orders")
            assert described.configs["retention.ms"] == "60000"
            assert described.topic_id == created.topic_id

    asyncio.run(main())


def test_a_recreated_name_never_reads_the_deleted_topics_data(tmp_path: Path) -> None:
    async def main() -> None:
        async with started(tmp_path) as broker:
            await broker.admin.create_topic("gone", 1)
            await broker.appends.append_batches(
                "gone", 0, bytearray(encode_batch([(None, b"x", [])]))
            )
            await broker.admin.delete_topic("gone")
            assert not (tmp_path / "gone-0").exists()
            await broker.admin.create_topic("gone", 1)
            assert await broker.reads.offsets("gone", 0) == (0, 0)
        (tmp_path / "gone-0.abc.deleted").mkdir()  # a crash between rename and removal
        stray = tmp_path / "stray-0"
        stray.mkdir()
        (stray / "partition.metadata").write_text("version: 0\ntopic_id: not-in-the-cluster\n")
        async with started(tmp_path) as again:
            assert not (tmp_path / "gone-0.abc.deleted").exists()
            assert not stray.exists()
            assert again.admin.list_topics() == ["gone"]

    asyncio.run(main())


def test_a_pre_cluster_catalog_is_imported_with_its_data(tmp_path: Path) -> None:
    async def main() -> None:
        async with started(tmp_path) as first:
            # Recreate the earlier layout: the data exists, the cluster does not know it yet.
            await first.admin.create_topic("seed", 1)
            await first.appends.append_batches(
                "seed", 0, bytearray(encode_batch([(None, b"v", [])]))
            )
        (tmp_path / "seed-0").rename(tmp_path / "old-0")
        (tmp_path / "old-0" / "partition.metadata").unlink()
        (tmp_path / "cluster.db").unlink()
        (tmp_path / "meta.properties").unlink()
        # What a single broker of an earlier version left: topics.json, a partition directory
        # without partition.metadata, and producers.json.
        (tmp_path / "topics.json").write_bytes(
            orjson.dumps(
                {"topics": {"old": {"partitions": 1, "replication_factor": 1, "configs": {}}}}
            )
        )
        (tmp_path / "producers.json").write_bytes(orjson.dumps({"next_id": 5000, "producers": {}}))
        async with started(tmp_path) as broker:
            assert broker.admin.list_topics() == ["old"]
            assert await broker.reads.offsets("old", 0) == (0, 1)
            assert topic_id_of(tmp_path / "old-0") == broker.image.topics["old"].topic_id
            producer_id, _epoch = await broker.appends.init_producer(None, None)
            assert producer_id >= 5000  # never an id the single broker issued
        assert (tmp_path / "topics.json.imported").exists()

    asyncio.run(main())


def test_metadata_of_another_cluster_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with started(tmp_path) as broker:
            await broker.admin.create_topic("kept", 1)
        (tmp_path / "cluster.db").unlink()
        with pytest.raises(ClusterMismatchError, match="BROKER_METADATA_URL"):
            async with started(tmp_path):
                pass
        assert (tmp_path / "kept-0").exists()  # nothing deleted

    asyncio.run(main())


def test_expired_producers_leave_partition_state_too(tmp_path: Path) -> None:
    async def main() -> None:
        clock = ManualClock(start_s=1_800_000_000.0)
        async with started(tmp_path, producer_id_expiration_ms=1000) as broker:
            broker.clock = clock
            await broker.admin.create_topic("t", 1)
            pid, epoch = await broker.appends.init_producer(None, None)
            body = encode_batch(
                [(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0
            )
            await broker.appends.append_batches("t", 0, bytearray(body))
            assert list(broker.routing.served_log("t", 0).producers.entries) == [pid]
            clock.advance(0.5)
            assert await broker.expire_producers() == []
            clock.advance(1.0)
            assert await broker.expire_producers() == [pid]
            assert broker.routing.served_log("t", 0).producers.entries == {}

    asyncio.run(main())


def test_copied_producer_state_is_kept_until_its_own_batches_expire(tmp_path: Path) -> None:
    """A follower copies the state of producers that never wrote to it; it must still know
    their sequences when their retries reach it as the new leader, so expiry goes by the
    partition's own last batch of each producer, not by whether this broker saw the producer."""

    async def main() -> None:
        clock = ManualClock(start_s=1_800_000_000.0)
        async with started(tmp_path, producer_id_expiration_ms=1000) as broker:
            broker.clock = clock
            await broker.admin.create_topic("t", 1)
            plog = broker.routing.served_log("t", 0)
            copied = encode_batch(
                [(None, b"x", [])], producer_id=77, producer_epoch=0, base_sequence=0
            )
            await plog.append_as_follower(copied, broker.now_ms())  # as a replica copies it
            assert await broker.expire_producers() == []
            assert list(plog.producers.entries) == [77]
            clock.advance(1.5)
            await broker.expire_producers()
            assert plog.producers.entries == {}

    asyncio.run(main())
