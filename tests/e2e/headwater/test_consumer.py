"""The Consumer and AdminClient against a real broker process: order, positions, resets, admin."""

from __future__ import annotations

import time

import pytest

from headwater import (
    OFFSET_BEGINNING,
    AdminClient,
    Consumer,
    Message,
    Producer,
    TopicPartition,
)
from headwater.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    TopicNotFoundError,
)
from headwater.records import partition_for_key
from headwater.types import PartitionId
from tests.support import ServiceProcess, unique

pytestmark = pytest.mark.e2e


def _filled_topic(broker: ServiceProcess, count: int, partitions: int = 1) -> str:
    topic = unique("consumer")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, partitions)
    # Small batches so a fetch returns batches that begin before the requested offset.
    config = {"bootstrap.servers": broker.url, "batch.size": 2000}
    with Producer(config) as producer:
        for i in range(count):
            producer.produce(topic, b"value-%d" % i, partition=i % partitions)
        assert producer.flush(30) == 0
    return topic


def _tp(topic: str, partition: int = 0, offset: int | None = None) -> TopicPartition:
    if offset is None:
        return TopicPartition(topic, PartitionId(partition))
    return TopicPartition(topic, PartitionId(partition), offset)


def _position(consumer: Consumer, topic: str) -> int:
    [tp] = consumer.position([_tp(topic)])
    return tp.offset


def test_consumer_reads_every_record_in_order(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 1000)
    config = {
        "bootstrap.servers": broker.url,
        "auto.offset.reset": "earliest",
        "max.poll.records": 128,
    }
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic)])
        got: list[Message] = []
        while len(got) < 1000:
            batch = consumer.consume(128, 5.0)
            assert 0 < len(batch) <= 128
            got.extend(batch)
        assert consumer.poll(0.2) is None
        assert consumer.consume(10, 0.2) == []
        assert _position(consumer, topic) == 1000
    assert [r.offset() for r in got] == list(range(1000))
    assert [r.value() for r in got] == [b"value-%d" % i for i in range(1000)]
    assert {(r.topic(), r.partition()) for r in got} == {(topic, 0)}


def test_poll_returns_one_message_and_consume_a_list(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 5)
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic)])
        first = consumer.poll(5.0)
        assert isinstance(first, Message)
        assert (first.topic(), first.partition(), first.offset(), first.value()) == (
            topic,
            0,
            0,
            b"value-0",
        )
        assert first.key() is None
        assert first.headers() is None
        assert first.error() is None
        kind, ms = first.timestamp()
        assert kind == 1
        assert ms > 0
        assert [m.offset() for m in consumer.consume(num_messages=3, timeout=5.0)] == [1, 2, 3]
        assert [m.offset() for m in consumer.consume(10, 5.0)] == [4]
        with pytest.raises(ValueError, match="num_messages"):
            consumer.consume(0, 1.0)


def test_seek_starts_mid_batch_and_position_follows(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 300)
    with Consumer({"bootstrap.servers": broker.url, "max.poll.records": 10}) as consumer:
        consumer.assign([_tp(topic)])
        consumer.seek(_tp(topic, offset=123))
        assert _position(consumer, topic) == 123
        records = consumer.consume(10, 5.0)
        assert [r.offset() for r in records] == list(range(123, 133))
        assert _position(consumer, topic) == 133
        consumer.seek_to_beginning()
        first = consumer.poll(5.0)
        assert first is not None
        assert first.offset() == 0
        consumer.seek_to_end()
        assert _position(consumer, topic) == 300
        consumer.seek(_tp(topic, offset=OFFSET_BEGINNING))
        assert _position(consumer, topic) == 0
    with Consumer({"bootstrap.servers": broker.url}) as consumer:
        consumer.assign([_tp(topic, offset=290)])  # assign() starts where the offset says
        assert [r.offset() for r in consumer.consume(100, 5.0)] == list(range(290, 300))


def test_latest_reset_sees_only_new_records(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 5)
    with Consumer({"bootstrap.servers": broker.url}) as consumer:
        consumer.assign([_tp(topic)])
        assert _position(consumer, topic) == 5
        assert consumer.poll(0.2) is None
        with Producer({"bootstrap.servers": broker.url}) as producer:
            producer.produce(topic, b"new", partition=0).result(10)
        assert [(r.offset(), r.value()) for r in consumer.consume(10, 5.0)] == [(5, b"new")]


def test_poll_long_polls_until_a_record_arrives(broker: ServiceProcess) -> None:
    import threading

    topic = _filled_topic(broker, 1)
    with Consumer({"bootstrap.servers": broker.url, "fetch.max.wait.ms": 3000}) as consumer:
        consumer.assign([_tp(topic)])
        consumer.position([_tp(topic)])

        def produce_later() -> None:
            time.sleep(0.3)
            with Producer({"bootstrap.servers": broker.url, "linger.ms": 0}) as producer:
                producer.produce(topic, b"late", partition=0).result(10)

        thread = threading.Thread(target=produce_later)
        started = time.monotonic()
        thread.start()
        records = consumer.consume(10, 5.0)
        waited = time.monotonic() - started
        thread.join()
    assert [r.value() for r in records] == [b"late"]
    assert 0.25 < waited < 4.0


def test_out_of_range_position_resets_or_raises(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 10)
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic)])
        consumer.seek(_tp(topic, offset=50))
        # The out-of-range fetch resets the position to the log start within the same poll.
        assert [r.offset() for r in consumer.consume(100, 5.0)] == list(range(10))
    with Consumer({"bootstrap.servers": broker.url, "auto.offset.reset": "none"}) as consumer:
        consumer.assign([_tp(topic)])
        with pytest.raises(OffsetOutOfRangeError, match=r"auto\.offset\.reset is none"):
            consumer.position([_tp(topic)])
        consumer.seek(_tp(topic, offset=50))
        with pytest.raises(OffsetOutOfRangeError, match=r"valid range is \[0, 10\]"):
            consumer.poll(0.5)


def test_several_partitions_are_all_served(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 90, partitions=3)
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic, p) for p in range(3)])
        got: list[Message] = []
        deadline = time.monotonic() + 20
        while len(got) < 90 and time.monotonic() < deadline:
            got.extend(consumer.consume(500, 1.0))
    by_partition = {p: [r.value() for r in got if r.partition() == p] for p in range(3)}
    assert by_partition == {p: [b"value-%d" % i for i in range(p, 90, 3)] for p in range(3)}


def test_assignment_and_seek_validation(broker: ServiceProcess) -> None:
    with Consumer({"bootstrap.servers": broker.url}) as consumer:
        consumer.assign([_tp("a"), _tp("a"), _tp("b", 1)])
        assert consumer.assignment() == [_tp("a"), _tp("b", 1)]
        with pytest.raises(ValueError, match="c-0 is not assigned"):
            consumer.seek(_tp("c", offset=0))
        with pytest.raises(ValueError, match="needs an offset >= 0"):
            consumer.seek(_tp("a"))  # OFFSET_INVALID: no offset given


def test_admin_client_round_trip(broker: ServiceProcess) -> None:
    topic = unique("admin")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        created = admin.create_topic(topic, 2, 1, {"retention.ms": "3600000"})
        assert (created.name, len(created.partitions)) == (topic, 2)
        assert created.configs["retention.ms"] == "3600000"
        assert topic in admin.topic_names()
        metadata = admin.list_topics()
        assert sorted(metadata.topics[topic].partitions) == [0, 1]
        assert metadata.topics[topic].partitions[1].id == 1
        [(_, only)] = admin.list_topics(topic, timeout=10).topics.items()
        assert only.topic == topic
        assert only.error is None
        missing = admin.list_topics("no-such-" + topic).topics["no-such-" + topic]
        assert isinstance(missing.error, TopicNotFoundError)
        assert missing.partitions == {}
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topic(topic, 1)
        with pytest.raises(InvalidConfigError):
            admin.create_topic(unique("admin"), 1, configs={"retention.ms": "soon"})
        grown = admin.create_partitions(topic, 4)
        assert [p.partition for p in grown.partitions] == [0, 1, 2, 3]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions(topic, 4)
        with Producer({"bootstrap.servers": broker.url}) as producer:
            for ts in (1000, 2000, 3000):
                producer.produce(topic, b"t%d" % ts, partition=3, timestamp=ts)
            producer.flush(30)
        offsets = admin.offsets(topic, 3)
        assert (offsets.beginning_offset, offsets.end_offset) == (0, 3)
        assert admin.offset_for_timestamp(topic, 3, 1500) == (1, 2000)
        assert admin.offset_for_timestamp(topic, 3, 9999) == (None, None)
        described = admin.describe_topic(topic)
        assert [(p.partition, p.end_offset) for p in described.partitions] == [
            (0, 0),
            (1, 0),
            (2, 0),
            (3, 3),
        ]
        admin.delete_topic(topic)
        with pytest.raises(TopicNotFoundError):
            admin.describe_topic(topic)


def test_broker_client_rest_proxy_routes(broker: ServiceProcess) -> None:
    from headwater.client.broker import BrokerClient

    topic = unique("client")
    keyed = partition_for_key(b'"k"', 2)  # json format: the key bytes are its JSON text
    with BrokerClient(broker.url) as client:
        client.create_topic(topic, 2)
        produced = client.produce_json(
            topic,
            [
                {"key": "k", "value": {"n": 1}, "headers": [{"key": "h", "value": "v"}]},
                {"value": [1, 2], "partition": 1},
            ],
        )
        second = 1 if keyed == 1 else 0  # offset of the explicit partition-1 record
        assert [(o.partition, o.offset, o.error_code) for o in produced] == [
            (keyed, 0, None),
            (1, second, None),
        ]
        binary = client.produce_json(
            topic, [{"key": "a2V5", "value": "aGVsbG8="}], partition=0, embedded="binary"
        )
        end_of_zero = 1 if keyed == 0 else 0
        assert [(o.partition, o.offset) for o in binary] == [(0, end_of_zero)]
        records = client.fetch_json(topic, 0, 0, embedded="binary")
        assert [(r["offset"], r["key"], r["value"]) for r in records][-1] == (
            end_of_zero,
            "a2V5",
            "aGVsbG8=",
        )
        partition = client.describe_partition(topic, 0)
        assert (partition.partition, partition.beginning_offset, partition.end_offset) == (
            0,
            0,
            end_of_zero + 1,
        )
        assert [p.partition for p in client.list_partitions(topic)] == [0, 1]
        assert client.healthy()


def test_pause_resume_and_incremental_assignment(broker: ServiceProcess) -> None:
    topic = _filled_topic(broker, 20, partitions=2)
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic, 0)])
        consumer.incremental_assign([_tp(topic, 1, offset=5)])
        assert consumer.assignment() == [_tp(topic, 0), _tp(topic, 1)]
        assert [tp.offset for tp in consumer.position([_tp(topic, 1)])] == [5]
        consumer.pause([_tp(topic, 0)])
        got = consumer.consume(100, 5.0)
        assert {(m.partition(), m.offset()) for m in got} == {(1, o) for o in range(5, 10)}
        assert consumer.consume(100, 0.2) == []  # partition 0 is paused, 1 is drained
        consumer.resume([_tp(topic, 0)])
        assert [m.offset() for m in consumer.consume(100, 5.0)] == list(range(10))
        consumer.incremental_unassign([_tp(topic, 0)])
        assert consumer.assignment() == [_tp(topic, 1)]
        consumer.unassign()
        assert consumer.assignment() == []
        assert consumer.poll(0.1) is None


def test_watermarks_and_offsets_for_times(broker: ServiceProcess) -> None:
    topic = unique("times")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        for ts in (1000, 2000, 3000):
            producer.produce(topic, b"t%d" % ts, partition=0, timestamp=ts)
        assert producer.flush(30) == 0
    with Consumer({"bootstrap.servers": broker.url}) as consumer:
        assert consumer.get_watermark_offsets(_tp(topic)) == (0, 3)
        found = consumer.offsets_for_times([_tp(topic, offset=1500), _tp(topic, offset=9999)])
        assert [(tp.topic, tp.partition, tp.offset) for tp in found] == [
            (topic, 0, 1),
            (topic, 0, -1),  # OFFSET_END: no record at or after that time
        ]
        assert topic in consumer.list_topics().topics


def test_log_append_time_topics_say_so_in_the_timestamp_type(broker: ServiceProcess) -> None:
    topic = unique("append-time")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        producer.produce(topic, b"stamped by the broker", timestamp=1_000)
        assert producer.flush(30) == 0
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([_tp(topic)])
        msg = consumer.poll(5.0)
        assert msg is not None
        kind, ms = msg.timestamp()
        assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert ms >= before - 1000  # the broker's clock, not the producer's 1000
