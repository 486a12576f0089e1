"""The broker core over typed records: partition choice, request order, checks before decoding,
and the I/O error policy of the interval fsync.

Each test runs a one-broker cluster on a SQLite file in ``tmp_path`` (no sockets).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from headwater.errors import InvalidRecordError, PartitionNotFoundError, TopicNotFoundError
from headwater.types import Offset, PartitionId
from headwater_broker.appends import ProducedOffset, ProducerRecord
from headwater_broker.broker import Broker
from headwater_broker.settings import BrokerSettings


class Records:
    """A record source over records already decoded; counts how often the broker asks."""

    def __init__(self, *records: ProducerRecord) -> None:
        self.records = list(records)
        self.decoded = 0

    def decode(self) -> list[ProducerRecord]:
        self.decoded += 1
        return self.records


def record(key: bytes | None, value: bytes, partition: int | None = None) -> ProducerRecord:
    return ProducerRecord(partition, key, value, [("h", b"1")])


@asynccontextmanager
async def started(path: Path) -> AsyncIterator[Broker]:
    broker = Broker(BrokerSettings(data_dir=str(path)))
    broker.open()
    await broker.start()
    try:
        await broker.admin.create_topic("orders", 4)
        yield broker
    finally:
        await broker.close()


Scenario = Callable[[Broker], Awaitable[None]]


@pytest.fixture
def run(tmp_path: Path) -> Callable[[Scenario], None]:
    """Run a scenario against a started broker with topic "orders" (4 partitions)."""

    def go(scenario: Scenario) -> None:
        async def main() -> None:
            async with started(tmp_path) as broker:
                await scenario(broker)

        asyncio.run(main())

    return go


def test_keys_pick_kafkas_partition_and_offsets_come_back_in_request_order(
    run: Callable[[Scenario], None],
) -> None:
    async def scenario(broker: Broker) -> None:
        # murmur2 vectors: "21" -> -973932308, "foobar" -> -790332482, "abc" -> 479470107;
        # (h & 0x7fffffff) % 4 puts them on partitions 0, 2 and 3.
        source = Records(
            record(b"foobar", b"v0"),
            record(b"21", b"v1"),
            record(b"abc", b"v2"),
            record(b"foobar", b"v3"),
            record(None, b"v4", partition=1),
        )
        offsets = await broker.appends.produce("orders", None, source)
        assert offsets == [
            ProducedOffset(PartitionId(2), Offset(0)),
            ProducedOffset(PartitionId(0), Offset(0)),
            ProducedOffset(PartitionId(3), Offset(0)),
            ProducedOffset(PartitionId(2), Offset(1)),
            ProducedOffset(PartitionId(1), Offset(0)),
        ]
        fetched = await broker.reads.fetch_records("orders", 2, 0, 1 << 20, 0, None)
        assert [(r.offset, r.key, r.value, r.headers) for r in fetched.records] == [
            (0, b"foobar", b"v0", [("h", b"1")]),
            (1, b"foobar", b"v3", [("h", b"1")]),
        ]

    run(scenario)


def test_the_path_partition_takes_every_record(run: Callable[[Scenario], None]) -> None:
    async def scenario(broker: Broker) -> None:
        source = Records(record(b"21", b"a"), record(None, b"b", partition=3))
        assert await broker.appends.produce("orders", 3, source) == [(3, 0), (3, 1)]

    run(scenario)


def test_a_record_partition_other_than_the_paths_is_refused(
    run: Callable[[Scenario], None],
) -> None:
    async def scenario(broker: Broker) -> None:
        source = Records(record(None, b"a"), record(None, b"b", partition=1))
        with pytest.raises(InvalidRecordError) as raised:
            await broker.appends.produce("orders", 3, source)
        assert str(raised.value) == "records[1].partition 1 differs from the path's partition 3"
        assert await broker.reads.offsets("orders", 3) == (0, 0)

    run(scenario)


def test_topic_and_path_partition_are_checked_before_the_records_are_decoded(
    run: Callable[[Scenario], None],
) -> None:
    async def scenario(broker: Broker) -> None:
        missing_topic = Records(record(None, b"a"))
        with pytest.raises(TopicNotFoundError):
            await broker.appends.produce("nope", None, missing_topic)
        missing_partition = Records(record(None, b"a"))
        with pytest.raises(PartitionNotFoundError):
            await broker.appends.produce("orders", 4, missing_partition)
        assert (missing_topic.decoded, missing_partition.decoded) == (0, 0)

    run(scenario)


def test_min_insync_replicas_defaults_to_the_broker_setting_capped_at_the_replicas(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        broker = Broker(BrokerSettings(data_dir=str(tmp_path), min_insync_replicas=2))
        broker.open()
        await broker.start()
        try:
            await broker.admin.create_topic("plain", 1)
            await broker.admin.create_topic("strict", 1, configs={"min.insync.replicas": "3"})
            replicas = broker.replicas
            assert replicas is not None
            # Three replicas would take the broker's 2; this one-broker topic has one.
            assert replicas.replication_settings("plain", 3)[0] == 2
            assert replicas.replication_settings("plain", 1)[0] == 1
            # A topic's own setting is kept as it is, even above its replica count.
            assert replicas.replication_settings("strict", 1)[0] == 3
        finally:
            await broker.close()

    asyncio.run(main())


def test_an_empty_rack_is_no_rack() -> None:
    assert BrokerSettings(rack="").rack is None
    assert BrokerSettings(rack="zone-a").rack == "zone-a"


def test_a_failed_fsync_under_interval_takes_the_storage_offline(tmp_path: Path) -> None:
    """One I/O error policy: under ``BROKER_FSYNC=interval`` a failed fdatasync is a failed disk,
    as under ``always`` -- the broker takes its data directory offline (and stops heartbeating,
    so its leaderships move), rather than swallowing the error and acknowledging on."""

    async def main() -> None:
        settings = BrokerSettings(data_dir=str(tmp_path), fsync="interval", fsync_interval_ms=50)
        broker = Broker(settings)
        broker.open()
        await broker.start()
        try:
            await broker.admin.create_topic("orders", 1)
            await broker.appends.produce("orders", 0, Records(record(None, b"v")))
            segment = broker.routing.served_log("orders", 0).local.active
            # A pipe's descriptor in place of the segment file's: fdatasync fails (EINVAL).
            read_end, write_end = os.pipe()
            good, segment._fd = segment._fd, write_end
            segment.dirty = True
            try:
                for _ in range(100):
                    if broker.node.storage_offline:
                        break
                    await asyncio.sleep(0.05)
            finally:
                segment._fd = good
                os.close(read_end)
                os.close(write_end)
            assert broker.node.storage_offline
            ready, details = broker.ready()
            assert not ready
            assert details["storage_offline"] is True
        finally:
            await broker.close()

    asyncio.run(main())
