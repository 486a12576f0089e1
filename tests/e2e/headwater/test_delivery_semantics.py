"""The three delivery semantics of consumer groups, end to end against real broker and
coordinator processes, each with a crash between the steps that decide it.

* at most once: commit, then process -- a crash loses the uncommitted-but-unprocessed records;
* at least once (the default): process, then commit -- a crash re-delivers, never loses;
* exactly once for consume-transform-produce: produce with the idempotent producer, wait for the
  acknowledgement, then commit; a crash re-produces, and the reader of the output removes the
  duplicates by the source (partition, offset) each output record carries.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from headwater import AdminClient, Consumer, Producer, TopicPartition
from headwater.message import Message
from headwater.types import PartitionId
from tests.e2e.groups_platform import Platform, start_platform
from tests.support import ROOT, unique

# The coordinator process uses the machine's Redis.
pytestmark = [pytest.mark.e2e, pytest.mark.needs("redis")]

PARTITIONS, RECORDS = 4, 200


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp("delivery")
    with start_platform(tmp, "hwtest-delivery", heartbeat_interval_ms=500) as platform:
        yield platform


def consumer(platform: Platform, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": platform.broker.url,
            "group.id": group,
            "coordinator.url": platform.coordinator.url,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.poll.records": 40,
        }
    )
    c.subscribe([topic])
    return c


def poll_some(c: Consumer, timeout: float = 20.0) -> list[Message]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = c.consume(500, 0.5)
        if records:
            return records
    raise AssertionError("no records")


def drain(c: Consumer, idle: float = 2.0) -> list[Message]:
    """Everything left, committing after each batch (a well-behaved at-least-once consumer)."""
    out: list[Message] = []
    quiet_until = time.monotonic() + idle
    while time.monotonic() < quiet_until:
        records = c.consume(500, 0.3)
        if records:
            out.extend(records)
            c.commit(asynchronous=False)
            quiet_until = time.monotonic() + idle
    return out


def where(records: list[Message]) -> list[tuple[int, int]]:
    return [(r.partition(), r.offset()) for r in records]


ALL = {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}


def test_at_most_once_loses_what_a_crash_left_unprocessed(platform: Platform) -> None:
    topic, group = platform.make_topic("in", PARTITIONS, RECORDS), unique("amo")
    first = consumer(platform, group, topic)
    processed: list[tuple[int, int]] = []
    batch = poll_some(first)
    first.commit(asynchronous=False)  # commit first ...
    processed += where(batch[: len(batch) // 2])  # ... then crash halfway through processing
    first.close()  # no further commit: what a crash leaves behind
    second = consumer(platform, group, topic)
    processed += where(drain(second))
    second.close()
    unprocessed = set(where(batch[len(batch) // 2 :]))
    assert len(processed) == len(set(processed))  # never twice
    assert set(processed) == ALL - unprocessed  # and exactly the crashed half is lost
    assert len(unprocessed) > 0


def test_at_least_once_redelivers_after_a_crash_and_loses_nothing(platform: Platform) -> None:
    topic, group = platform.make_topic("in", PARTITIONS, RECORDS), unique("alo")
    first = consumer(platform, group, topic)
    processed: list[tuple[int, int]] = []
    batch = poll_some(first)
    processed += where(batch)  # processed ...
    first.close()  # ... crash before the commit
    second = consumer(platform, group, topic)
    processed += where(drain(second))
    second.close()
    assert set(processed) == ALL  # nothing lost
    duplicates = {k for k, n in Counter(processed).items() if n > 1}
    assert duplicates == set(where(batch))  # exactly the uncommitted batch came twice


def test_exactly_once_consume_transform_produce_with_dedup(platform: Platform) -> None:
    source, group = platform.make_topic("in", PARTITIONS, RECORDS), unique("eos")
    sink = unique("out")
    with AdminClient({"bootstrap.servers": platform.broker.url}) as admin:
        admin.create_topic(sink, 2)

    def transform(c: Consumer, producer: Producer, crash_before_commit: bool) -> int:
        """Produce each input's result, wait for the acks, then commit; returns batches."""
        batches = 0
        quiet_until = time.monotonic() + 2.0
        while time.monotonic() < quiet_until:
            records = c.consume(500, 0.3)
            if not records:
                continue
            for r in records:
                producer.produce(
                    sink,
                    b"%d" % (int(r.value() or b"0") * 10),
                    key=r.key(),
                    headers={"src": b"%d:%d" % (r.partition(), r.offset())},
                )
            assert producer.flush(30) == 0  # acknowledged (acks=all, idempotent) ...
            batches += 1
            if crash_before_commit:
                return batches  # ... and the process dies before committing
            c.commit(asynchronous=False)  # ... only then are the input offsets committed
            quiet_until = time.monotonic() + 2.0
        return batches

    with Producer({"bootstrap.servers": platform.broker.url}) as producer:
        first = consumer(platform, group, source)
        transform(first, producer, crash_before_commit=True)
        first.close()
        second = consumer(platform, group, source)
        transform(second, producer, crash_before_commit=False)
        second.close()

    reader = Consumer({"bootstrap.servers": platform.broker.url, "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition(sink, PartitionId(p)) for p in range(2)])
    output: list[Message] = []
    quiet_until = time.monotonic() + 2.0
    while time.monotonic() < quiet_until:
        records = reader.consume(500, 0.3)
        if records:
            output.extend(records)
            quiet_until = time.monotonic() + 2.0
    reader.close()
    sources = [dict(r.headers() or [])["src"] for r in output]
    assert len(sources) > len(set(sources))  # the crash re-produced a batch ...
    deduped: dict[bytes | None, bytes | None] = {}
    for r, src in zip(output, sources, strict=True):
        deduped.setdefault(src, r.value())  # ... which the reader drops by source position
    expected = {
        b"%d:%d" % (i % PARTITIONS, i // PARTITIONS): b"%d" % (i * 10) for i in range(RECORDS)
    }
    assert deduped == expected  # every input exactly once in effect, with the right result


def test_sdk_docs_document_the_semantics() -> None:
    page = (ROOT / "docs" / "sdk.md").read_text()
    section = page.split("## Consumer groups and delivery semantics", 1)[1].split("\n## ", 1)[0]
    for phrase in ("at most once", "at least once", "exactly once", "not guaranteed"):
        assert phrase in section.lower()
