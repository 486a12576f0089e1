"""The Producer against a real broker process: partitioning, codecs, idempotent retries, acks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.client.broker import BrokerClient
from headwater.errors import PartitionNotFoundError, TopicNotFoundError
from headwater.message import Message
from headwater.producer import (
    DeliveryFuture,
    DeliveryTimeoutError,
    ProducerClosedError,
)
from headwater.records import Compression, encode_batch, partition_for_key
from headwater.types import PartitionId
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e


def _topic(broker: ServiceProcess, partitions: int, **configs: str) -> str:
    name = unique("producer")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(name, partitions, configs=configs or None)
    return name


def _read_all(broker: ServiceProcess, topic: str, partition: int) -> list[Message]:
    config = {"bootstrap.servers": broker.url, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        tp = TopicPartition(topic, PartitionId(partition))
        consumer.assign([tp])
        with AdminClient({"bootstrap.servers": broker.url}) as admin:
            end = admin.offsets(topic, partition).end_offset
        records: list[Message] = []
        while consumer.position([tp])[0].offset < end:
            records.extend(consumer.consume(1000, 2.0))
        return records


def test_keyed_records_land_on_their_murmur2_partitions(broker: ServiceProcess) -> None:
    topic = _topic(broker, 4)
    keys = [f"customer-{i % 25}".encode() for i in range(200)]
    with Producer({"bootstrap.servers": broker.url}) as producer:
        futures = [producer.produce(topic, b"order-%d" % i, key=k) for i, k in enumerate(keys)]
        producer.flush(30)
        metadata = [f.result(5) for f in futures]
    assert [m.partition for m in metadata] == [partition_for_key(k, 4) for k in keys]
    for partition in range(4):
        stored = _read_all(broker, topic, partition)
        expected = [
            (k, b"order-%d" % i) for i, k in enumerate(keys) if partition_for_key(k, 4) == partition
        ]
        assert [(r.key(), r.value()) for r in stored] == expected
        assert [r.offset() for r in stored] == list(range(len(expected)))
        assert sorted(m.offset for m in metadata if m.partition == partition) == list(
            range(len(expected))
        )


def test_explicit_partition_wins_and_a_missing_one_is_refused(broker: ServiceProcess) -> None:
    topic = _topic(broker, 3)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        meta = producer.produce(topic, b"v", key=b"21", partition=1).result(10)
        assert (meta.topic, meta.partition, meta.offset) == (topic, 1, 0)
        with pytest.raises(PartitionNotFoundError, match="partition 3 of topic"):
            producer.produce(topic, b"v", partition=3)
        with pytest.raises(TopicNotFoundError):
            producer.produce(unique("missing"), b"v")


def test_unkeyed_records_stick_to_one_partition_per_batch(broker: ServiceProcess) -> None:
    topic = _topic(broker, 3)
    config = {"bootstrap.servers": broker.url, "linger.ms": 10_000, "batch.size": 100_000}
    with Producer(config) as producer:
        futures = [producer.produce(topic, b"x" * 100) for _ in range(50)]
        producer.flush(30)
        partitions = {f.result(5).partition for f in futures}
    assert len(partitions) == 1  # 50 small records fill less than one batch: one partition


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_through_the_broker(broker: ServiceProcess, codec: str) -> None:
    topic = _topic(broker, 1)
    values = [(b"%d:" % i) + b"payload " * (i % 40) for i in range(300)]
    with Producer({"bootstrap.servers": broker.url, "compression.type": codec}) as producer:
        for i, value in enumerate(values):
            producer.produce(topic, value, key=b"k%d" % i, headers=[("codec", codec.encode())])
        assert producer.flush(30) == 0
    with BrokerClient(broker.url) as client:
        raw = client.fetch_batches(topic, 0, 0).data
    from headwater.records import iter_batches

    assert {h.compression for _, h in iter_batches(raw)} == {Compression.from_name(codec)}
    stored = _read_all(broker, topic, 0)
    assert [r.value() for r in stored] == values
    assert [r.key() for r in stored] == [b"k%d" % i for i in range(300)]
    assert {tuple(r.headers() or []) for r in stored} == {(("codec", codec.encode()),)}


def test_headers_timestamps_tombstones_and_callbacks(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    seen: list[tuple[BaseException | None, tuple[object, ...]]] = []
    with Producer({"bootstrap.servers": broker.url}) as producer:
        producer.produce(
            topic,
            None,
            key="user-1",
            headers={"trace": "abc", "empty": None},
            timestamp=1_700_000_000_123,
            on_delivery=lambda err, msg: seen.append(
                (err, (msg.topic(), msg.partition(), msg.offset(), msg.timestamp(), msg.key()))
            ),
        )
        producer.produce(topic, "text value", timestamp=1_700_000_000_456)
        assert seen == []  # delivery callbacks run in poll() and flush(), on this thread
        assert producer.flush(30) == 0
    assert seen == [(None, (topic, 0, 0, (1, 1_700_000_000_123), b"user-1"))]
    stored = _read_all(broker, topic, 0)
    assert [(r.key(), r.value(), (r.headers() or []), r.timestamp()[1]) for r in stored] == [
        (b"user-1", None, [("trace", b"abc"), ("empty", None)], 1_700_000_000_123),
        (None, b"text value", [], 1_700_000_000_456),
    ]


def test_future_callbacks_run_once_before_or_after_delivery(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    calls: list[tuple[str, int]] = []
    ran = threading.Event()

    def before(future: DeliveryFuture) -> None:
        calls.append(("before", future.result(0).offset))
        ran.set()

    # A long linger keeps the batch open, so the first callback is registered before delivery.
    with Producer({"bootstrap.servers": broker.url, "linger.ms": 60_000}) as producer:
        first = producer.produce(topic, b"a")
        second = producer.produce(topic, b"b")
        first.add_done_callback(before)
        assert calls == []
        assert producer.flush(30) == 0
        assert ran.wait(10)  # on a producer worker thread, after the batch is done
        second.add_done_callback(lambda f: calls.append(("after", f.result(0).offset)))
        assert calls == [("before", 0), ("after", 1)]  # the second one ran at once
    assert calls == [("before", 0), ("after", 1)]


def test_log_append_time_topics_report_the_broker_time(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1, **{"message.timestamp.type": "LogAppendTime"})
    with Producer({"bootstrap.servers": broker.url}) as producer:
        meta = producer.produce(topic, b"v", timestamp=1000).result(10)
    assert meta.timestamp > 1_700_000_000_000
    assert [r.timestamp()[1] for r in _read_all(broker, topic, 0)] == [meta.timestamp]


def test_acks_zero_delivers_without_offsets(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    with Producer({"bootstrap.servers": broker.url, "acks": 0}) as producer:
        futures = [producer.produce(topic, b"%d" % i) for i in range(10)]
        producer.flush(30)
        assert {f.result(5).offset for f in futures} == {-1}
    assert [r.value() for r in _read_all(broker, topic, 0)] == [b"%d" % i for i in range(10)]


def test_a_resent_idempotent_batch_is_stored_once(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    with BrokerClient(broker.url) as client:
        producer_id, epoch = client.init_producer()
        first = encode_batch(
            [(None, b"a", []), (None, b"b", [])],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=0,
        )
        assert [
            (a.base_offset, a.last_offset, a.duplicate)
            for a in client.produce_batches(topic, 0, first)
        ] == [(0, 1, False)]
        again = client.produce_batches(topic, 0, first)
        assert [(a.base_offset, a.last_offset, a.duplicate) for a in again] == [(0, 1, True)]
        assert client.offsets(topic, 0).end_offset == 2


class _LoseFirstResponse(httpx.BaseTransport):
    """A real HTTP transport that, once, lets a batch POST reach the broker and then reports a
    read timeout -- as when a response is lost on the network after the append happened."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/batches") and self.lost == 0:
            response.read()
            response.close()
            self.lost += 1
            raise httpx.ReadTimeout("response lost", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_producer_retry_after_a_lost_response_is_stored_once(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    transport = _LoseFirstResponse()
    config = {"bootstrap.servers": broker.url, "retry.backoff.ms": 10}
    with Producer(config, transport=transport) as producer:
        futures = [producer.produce(topic, b"r%d" % i) for i in range(20)]
        producer.flush(30)
        assert [f.result(5).offset for f in futures] == list(range(20))
    assert transport.lost == 1
    assert [r.value() for r in _read_all(broker, topic, 0)] == [b"r%d" % i for i in range(20)]


def test_without_idempotence_a_lost_response_duplicates(broker: ServiceProcess) -> None:
    # The contrast that shows what idempotence buys (Kafka behaves the same way).
    topic = _topic(broker, 1)
    transport = _LoseFirstResponse()
    config = {
        "bootstrap.servers": broker.url,
        "enable.idempotence": False,
        "retry.backoff.ms": 10,
    }
    with Producer(config, transport=transport) as producer:
        producer.produce(topic, b"once")
        producer.flush(30)
    assert [r.value() for r in _read_all(broker, topic, 0)] == [b"once", b"once"]


def test_records_survive_a_broker_restart_during_retries(tmp_path: Path) -> None:
    port = free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(tmp_path), "BROKER_FSYNC": "always"}
    process = ServiceProcess("headwater_broker", port, env, log_path=tmp_path / "log.txt").start()
    try:
        topic = _topic(process, 1)
        config = {"bootstrap.servers": process.url, "retry.backoff.ms": 50, "linger.ms": 0}
        with Producer(config) as producer:
            assert producer.produce(topic, b"before").result(10).offset == 0
            process.kill()
            futures = [producer.produce(topic, b"during-%d" % i) for i in range(5)]
            process.start()
            producer.flush(30)
            assert [f.result(5).offset for f in futures] == [1, 2, 3, 4, 5]
        values = [r.value() for r in _read_all(process, topic, 0)]
        assert values == [b"before"] + [b"during-%d" % i for i in range(5)]
    finally:
        process.stop()


def test_delivery_times_out_when_the_broker_stays_down(tmp_path: Path) -> None:
    port = free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(tmp_path)}
    config = {
        "bootstrap.servers": f"http://127.0.0.1:{port}",
        "delivery.timeout.ms": 800,
        "retry.backoff.ms": 50,
        "request.timeout.ms": 500,
    }
    with ServiceProcess("headwater_broker", port, env) as process, Producer(config) as producer:
        topic = _topic(process, 1)
        producer.produce(topic, b"ok").result(10)
        process.kill()
        future = producer.produce(topic, b"lost")
        bulk = producer.produce_many(topic, [b"lost too"] * 3)
        with pytest.raises(DeliveryTimeoutError, match="not acknowledged within"):
            future.result(10)
        # exception() gives the same error without building per-record metadata (the sink's use).
        assert isinstance(bulk.exception(10), DeliveryTimeoutError)


def test_full_default_batches_fit_the_brokers_max_message_bytes(broker: ServiceProcess) -> None:
    # 3 MB of 1 KB records: every batch the producer seals must stay under max.message.bytes.
    topic = _topic(broker, 1)
    value = b"v" * 1000
    with Producer({"bootstrap.servers": broker.url, "linger.ms": 1000}) as producer:
        futures = [producer.produce(topic, value, partition=0) for _ in range(3000)]
        assert producer.flush(30) == 0
        assert [f.result(5).offset for f in futures] == list(range(3000))
    with BrokerClient(broker.url) as client:
        raw = client.fetch_batches(topic, 0, 0, max_bytes=64 * 1_048_576).data
    from headwater.records import iter_batches

    sizes = [h.size for _, h in iter_batches(raw)]
    assert len(sizes) >= 3
    assert max(sizes) <= 1_000_000


def test_produce_many_keeps_order_partitions_and_results(broker: ServiceProcess) -> None:
    topic = _topic(broker, 3)
    keys = [b"key-%d" % (i % 11) for i in range(500)]
    values = [b"value-%d" % i for i in range(500)]
    with Producer({"bootstrap.servers": broker.url}) as producer:
        keyed = producer.produce_many(topic, values, keys=keys).result(30)
        unkeyed_future = producer.produce_many(topic, [b"u"] * 100, partition=2)
        assert unkeyed_future.exception(30) is None
        unkeyed = unkeyed_future.result(30)
    assert [m.partition for m in keyed] == [partition_for_key(k, 3) for k in keys]
    on_two = sum(1 for m in keyed if m.partition == 2)
    assert [m.offset for m in unkeyed] == list(range(on_two, on_two + 100))
    for partition in range(3):
        expected: list[tuple[bytes | None, bytes]] = [
            (k, v)
            for k, v in zip(keys, values, strict=True)
            if partition_for_key(k, 3) == partition
        ]
        if partition == 2:
            expected += [(None, b"u")] * 100
        assert [(r.key(), r.value()) for r in _read_all(broker, topic, partition)] == expected
    with (
        Producer({"bootstrap.servers": broker.url}) as producer,
        pytest.raises(TypeError, match="values must be bytes or None, got str"),
    ):
        producer.produce_many(topic, ["text"])  # type: ignore[list-item]


def test_an_expired_producer_id_is_replaced_and_the_batch_renumbered(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(tmp_path),
        "BROKER_PRODUCER_ID_EXPIRATION_MS": "200",
        "BROKER_RETENTION_CHECK_INTERVAL_MS": "100",
    }
    with ServiceProcess("headwater_broker", port, env, log_path=tmp_path / "log.txt") as process:
        topic = _topic(process, 1)
        with Producer({"bootstrap.servers": process.url, "linger.ms": 0}) as producer:
            assert producer.produce(topic, b"first").result(10).offset == 0
            first_id = producer._sender.identity
            time.sleep(1.0)  # the broker's upkeep forgets the idle producer id
            assert producer.produce(topic, b"second").result(10).offset == 1
            assert producer._sender.identity is not None
            assert first_id is not None
            assert producer._sender.identity.producer_id != first_id.producer_id
        assert [r.value() for r in _read_all(process, topic, 0)] == [b"first", b"second"]


def test_a_dead_bootstrap_server_is_skipped(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    dead = f"http://127.0.0.1:{free_port()}"
    config = {"bootstrap.servers": f"{dead},{broker.url}", "retry.backoff.ms": 10}
    with Producer(config) as producer:
        assert producer.produce(topic, b"via the second").result(10).offset == 0
    assert [r.value() for r in _read_all(broker, topic, 0)] == [b"via the second"]


def test_flush_reports_unfinished_batches_and_close_refuses_more(tmp_path: Path) -> None:
    port = free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(tmp_path)}
    process = ServiceProcess("headwater_broker", port, env).start()
    try:
        topic = _topic(process, 2)
        config = {"bootstrap.servers": process.url, "retry.backoff.ms": 50, "linger.ms": 0}
        producer = Producer(config)
        producer.produce(topic, b"ok", partition=0).result(10)
        process.kill()
        pending = [producer.produce(topic, b"waiting", partition=p) for p in (0, 1)]
        assert producer.flush(0.3) == 2  # one batch per partition, neither acknowledged
        assert not any(f.done() for f in pending)
        process.start()
        assert producer.flush(20) == 0
        placed = sorted((f.result(1).partition, f.result(1).offset) for f in pending)
        assert placed == [(0, 1), (1, 0)]
        producer.close()
        with pytest.raises(ProducerClosedError, match="closed producer"):
            producer.produce(topic, b"late")
    finally:
        process.stop()


def test_partitions_added_after_start_are_found(broker: ServiceProcess) -> None:
    topic = _topic(broker, 1)
    with Producer({"bootstrap.servers": broker.url}) as producer:
        assert producer.produce(topic, b"a", partition=0).result(10).partition == 0
        with AdminClient({"bootstrap.servers": broker.url}) as admin:
            admin.create_partitions(topic, 3)
        assert producer.produce(topic, b"b", partition=2).result(10).partition == 2


def test_delivery_reports_run_in_poll_and_flush_and_len_counts_records(
    broker: ServiceProcess,
) -> None:
    topic = _topic(broker, 1)
    reports: list[tuple[BaseException | None, int]] = []
    caller = threading.get_ident()
    threads: set[int] = set()

    def report(err: BaseException | None, msg: Message) -> None:
        threads.add(threading.get_ident())
        reports.append((err, msg.offset()))

    # A long linger holds the records in one open batch until flush() or poll() pushes them out.
    with Producer({"bootstrap.servers": broker.url, "linger.ms": 60_000}) as producer:
        for i in range(3):
            producer.produce(topic, b"%d" % i, callback=report)
        assert len(producer) == 3  # records, not batches
        assert producer.poll(0) == 0  # nothing delivered yet, so nothing ran
        assert producer.flush(30) == 0
        assert reports == [(None, 0), (None, 1), (None, 2)]
        assert threads == {caller}  # on the thread that called flush(), as confluent-kafka
        with pytest.raises(TypeError, match="on_delivery or callback"):
            producer.produce(topic, b"x", on_delivery=report, callback=report)
    with Producer({"bootstrap.servers": broker.url, "linger.ms": 0}) as producer:
        producer.produce(topic, b"3", on_delivery=report)
        served = 0
        deadline = time.monotonic() + 30
        while not served and time.monotonic() < deadline:
            served = producer.poll(1.0)
        assert (served, reports[-1], len(producer)) == (1, (None, 3), 0)  # poll() ran it
        metadata = producer.list_topics(topic, timeout=10)  # as AdminClient.list_topics
        assert sorted(metadata.topics[topic].partitions) == [0]


def test_a_failed_delivery_reports_its_error_and_a_raising_callback_reaches_the_caller(
    broker: ServiceProcess,
) -> None:
    from headwater.errors import RecordTooLargeError

    topic = _topic(broker, 1, **{"max.message.bytes": "2000"})
    seen: list[tuple[BaseException | None, Message]] = []
    with Producer({"bootstrap.servers": broker.url}) as producer:
        producer.produce(topic, b"x" * 5000, on_delivery=lambda err, msg: seen.append((err, msg)))
        assert producer.flush(30) == 0
        [(err, msg)] = seen
        assert isinstance(err, RecordTooLargeError)
        assert msg.error() is err
        assert (msg.topic(), msg.partition(), msg.offset()) == (topic, 0, -1001)

        def boom(err: BaseException | None, msg: Message) -> None:
            raise RuntimeError("callback failed")

        producer.produce(topic, b"ok", on_delivery=boom)
        with pytest.raises(RuntimeError, match="callback failed"):
            producer.flush(30)
        assert len(producer) == 0
