"""The consumer's group methods in confluent-kafka's shapes, against a real broker and coordinator:
commit(message=/offsets=/asynchronous=), committed(partitions), rebalance callbacks called as
(consumer, partitions), unsubscribe()."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from headwater import OFFSET_INVALID, Consumer, Message, TopicPartition
from headwater.consumer import RebalanceCallback
from headwater.groups.errors import FencedInstanceIdError
from tests.e2e.groups_platform import Platform, start_platform
from tests.support import unique

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp("group-api")
    with start_platform(tmp, "hwtest-group-api", heartbeat_interval_ms=500) as platform:
        yield platform


def _config(platform: Platform, group: str) -> dict[str, object]:
    return {
        "bootstrap.servers": platform.broker.url,
        "coordinator.url": platform.coordinator.url,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _read(consumer: Consumer, count: int) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.consume(count - len(got), 1.0))
    assert len(got) == count
    return got


def test_commit_message_offsets_and_asynchronous(platform: Platform) -> None:
    topic, group = platform.make_topic("group-api", 1, 10), unique("g")
    tp = TopicPartition(topic, 0)
    consumer = Consumer(_config(platform, group))
    consumer.subscribe([topic])
    try:
        last = _read(consumer, 4)[-1]
        committed = consumer.commit(message=last, asynchronous=False)
        assert isinstance(committed, list)
        assert [(t.topic, t.partition, t.offset) for t in committed] == [(topic, 0, 4)]
        assert [t.offset for t in consumer.committed([tp])] == [4]

        done = consumer.commit(offsets=[TopicPartition(topic, 0, 7)])  # asynchronous by default
        assert isinstance(done, Future)
        done.result(timeout=20)
        assert [t.offset for t in consumer.committed([tp], timeout=10)] == [7]

        with pytest.raises(ValueError, match="offset >= 0"):
            consumer.commit(offsets=[tp], asynchronous=False)  # OFFSET_INVALID: no offset
        with pytest.raises(ValueError, match="message or offsets"):
            consumer.commit(message=last, offsets=[TopicPartition(topic, 0, 1)])
    finally:
        consumer.close()
    # committed() needs group.id, not a subscription.
    with Consumer(_config(platform, group)) as reader:
        stored = reader.committed([tp, TopicPartition(topic, 9)])
        assert [(t.partition, t.offset) for t in stored] == [(0, 7), (9, OFFSET_INVALID)]


def test_rebalance_callbacks_get_the_consumer_and_a_sorted_list(platform: Platform) -> None:
    topic, group = platform.make_topic("group-api", 3, 6), unique("g")
    calls: list[tuple[str, bool, list[tuple[str, int]]]] = []
    consumer = Consumer(_config(platform, group))

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        calls.append(("assign", c is consumer, [(t.topic, t.partition) for t in partitions]))

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        calls.append(("revoke", c is consumer, [(t.topic, t.partition) for t in partitions]))

    try:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        _read(consumer, 6)
        everything = [(topic, 0), (topic, 1), (topic, 2)]
        assert calls == [("assign", True, everything)]
        consumer.unsubscribe()
        assert calls[-1] == ("revoke", True, everything)
        assert consumer.assignment() == []
        assert consumer.poll(0.1) is None
    finally:
        consumer.close()


def test_a_fenced_member_calls_on_lost_not_on_revoke(platform: Platform) -> None:
    topic, group = platform.make_topic("group-api", 1, 2), unique("g")
    calls: list[tuple[str, list[int]]] = []

    def record(name: str) -> RebalanceCallback:
        return lambda c, ps: calls.append((name, [t.partition for t in ps]))

    first = Consumer(_config(platform, group))
    first.subscribe(
        [topic], on_revoke=record("revoke"), on_lost=record("lost"), instance_id="static-1"
    )
    _read(first, 2)
    # A static member that starts again under the same instance id replaces the running one:
    # the old one is fenced, and its partitions may already be read by the new one.
    second = Consumer(_config(platform, group))
    second.subscribe([topic], instance_id="static-1")

    def poll_until_fenced() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            first.poll(0.5)

    try:
        # The fenced member's next poll() drops its partitions through on_lost, then raises.
        with pytest.raises(FencedInstanceIdError, match="replaced by a newer member"):
            poll_until_fenced()
        assert calls == [("lost", [0])]
        assert first.assignment() == []
    finally:
        second.close()
        first.close()
