"""The Broker's durable catalog: topics, deletion leftovers and producer expiry across restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from headwater.records.batch import encode_batch
from headwater_broker.broker import Broker
from headwater_broker.settings import BrokerSettings


def open_broker(path: Path, **settings: Any) -> Broker:
    broker = Broker(BrokerSettings(data_dir=str(path), **settings))
    broker.open()
    return broker


def test_catalog_file_and_partition_directories(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("orders", 2, configs={"retention.ms": 60000})
    assert (tmp_path / "topics.json").read_bytes() == (
        b'{"topics":{"orders":{"partitions":2,"replication_factor":1,'
        b'"configs":{"retention.ms":"60000"}}}}'
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["orders-0", "orders-1"]
    asyncio.run(broker.close())
    again = open_broker(tmp_path)
    assert again.describe_topic("orders").configs["retention.ms"] == "60000"
    asyncio.run(again.close())


def test_delete_leftovers_are_removed_on_open(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("gone", 1)
    asyncio.run(broker.delete_topic("gone"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]
    (tmp_path / "gone-0.abc.deleted").mkdir()  # a crash between rename and removal
    reopened = open_broker(tmp_path)
    assert not (tmp_path / "gone-0.abc.deleted").exists()
    assert reopened.list_topics() == []


def test_expired_producers_leave_partition_state_too(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    broker = Broker(BrokerSettings(data_dir=str(tmp_path), producer_id_expiration_ms=1000))
    broker.clock = lambda: now[0]
    broker.open()
    broker.create_topic("t", 1)
    pid, epoch = broker.init_producer(None, None)
    body = encode_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    asyncio.run(broker.append_batches("t", 0, bytearray(body)))
    assert list(broker.partition("t", 0).producers.entries) == [pid]
    now[0] += 0.5
    assert broker.expire_producers() == []
    now[0] += 1.0
    assert broker.expire_producers() == [pid]
    assert broker.partition("t", 0).producers.entries == {}
