"""The Producer's batches keep values, keys and headers as columns: records with and without keys,
headers and timestamps mixed in one batch come back exactly as produced, in order."""

from __future__ import annotations

import pytest

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.message import Message
from headwater.types import PartitionId
from tests.support import ServiceProcess, unique

pytestmark = pytest.mark.e2e


def _read(url: str, topic: str, count: int) -> list[Message]:
    config = {"bootstrap.servers": url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, PartitionId(0))])
        records: list[Message] = []
        while len(records) < count:
            records.extend(consumer.consume(1000, 2.0))
        return records


@pytest.mark.parametrize("sticky", [False, True])
def test_mixed_records_in_one_batch_come_back_exactly(broker: ServiceProcess, sticky: bool) -> None:
    topic = unique("columns")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    part = -1 if sticky else 0
    # A long linger keeps every record below in one open batch until flush().
    with Producer({"bootstrap.servers": broker.url, "linger.ms": 60_000}) as producer:
        producer.produce(topic, b"plain-0", partition=part)
        producer.produce(topic, b"plain-1", partition=part)
        bulk = producer.produce_many(topic, [b"bulk-2", None], partition=part)
        producer.produce(topic, b"keyed-4", key=b"k4", partition=0)
        producer.produce(topic, b"plain-5", partition=part)
        producer.produce(topic, None, headers={"h": b"x", "n": None}, partition=part)
        producer.produce_many(topic, [b"bulk-7", b"bulk-8"], keys=[None, b"k8"], partition=0)
        last = producer.produce(topic, b"timed-9", partition=part, timestamp=1_234)
        assert producer.flush(30) == 0
        metadata = last.result(5)
        assert [m.offset for m in bulk.result(5)] == [2, 3]
    assert (metadata.partition, metadata.offset, metadata.timestamp) == (0, 9, 1_234)
    stored = _read(broker.url, topic, 10)
    assert [(r.offset(), r.key(), r.value(), (r.headers() or [])) for r in stored] == [
        (0, None, b"plain-0", []),
        (1, None, b"plain-1", []),
        (2, None, b"bulk-2", []),
        (3, None, None, []),
        (4, b"k4", b"keyed-4", []),
        (5, None, b"plain-5", []),
        (6, None, None, [("h", b"x"), ("n", None)]),
        (7, None, b"bulk-7", []),
        (8, b"k8", b"bulk-8", []),
        (9, None, b"timed-9", []),
    ]
    assert stored[9].timestamp() == (1, 1_234)
    assert stored[0].timestamp() == stored[8].timestamp() != (1, 1_234)


def test_plain_batches_of_one_value_length_round_trip(broker: ServiceProcess) -> None:
    topic = unique("columns-plain")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    values = [b"%08d" % i for i in range(20_000)]  # crosses the 1-, 2- and 3-byte offset deltas
    with Producer({"bootstrap.servers": broker.url}) as producer:
        for value in values[:10_000]:
            producer.produce(topic, value, partition=0)
        producer.produce_many(topic, values[10_000:], partition=0)
        assert producer.flush(30) == 0
    stored = _read(broker.url, topic, len(values))
    assert [r.value() for r in stored] == values
    assert [r.offset() for r in stored] == list(range(len(values)))
