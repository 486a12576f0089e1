"""One small confluent-kafka-style program, run with Headwater's SDK and with confluent-kafka.

``program(kafka, ...)`` is written against confluent-kafka's API and takes the module it uses as
its only Headwater-specific choice: ``program(headwater, ...)`` runs it against a real broker and
checks what it read; ``program(confluent_kafka, ...)`` runs the very same code against an
address where nothing listens (confluent-kafka cannot reach Headwater, which speaks HTTP), which
proves every call it makes has the same parameters and return shapes there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

import headwater
from headwater import AdminClient
from tests.support import ServiceProcess, unique

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000_000


@dataclass
class Outcome:
    """What the program saw, in plain values both libraries produce."""

    served: list[int] = field(default_factory=list)
    left: int = -1
    delivered: list[tuple[str, int, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    consumed: list[tuple[Any, ...]] = field(default_factory=list)
    empty_batch: list[Any] | None = None
    assignment: list[tuple[str, int]] = field(default_factory=list)


def program(kafka: ModuleType, bootstrap: str, topic: str, wait: float) -> Outcome:
    """Produce three records with a delivery report, then read them back from the beginning."""
    out = Outcome()

    def delivery_report(err: Any, msg: Any) -> None:
        if err is not None:
            out.failed.append(str(err))
        else:
            out.delivered.append((msg.topic(), msg.partition(), msg.offset()))

    producer = kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(
            topic,
            value=b"value-%d" % i,
            key=b"key",
            partition=0,
            on_delivery=delivery_report,
            timestamp=T0 + i,
            headers=[("n", b"%d" % i)],
        )
        out.served.append(producer.poll(0))
    out.left = producer.flush(wait)

    consumer = kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"}
    )
    consumer.assign([kafka.TopicPartition(topic, 0, kafka.OFFSET_BEGINNING)])
    out.assignment = [(tp.topic, tp.partition) for tp in consumer.assignment()]
    deadline = time.monotonic() + wait
    while len(out.consumed) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        where = (msg.topic(), msg.partition(), msg.offset())
        out.consumed.append((*where, msg.key(), msg.value(), msg.headers(), msg.timestamp()))
    out.empty_batch = consumer.consume(num_messages=10, timeout=0.2)
    consumer.close()
    return out


def test_the_program_reads_back_what_it_wrote_with_headwater(broker: ServiceProcess) -> None:
    topic = unique("confluent-program")
    with AdminClient({"bootstrap.servers": broker.url}) as admin:
        admin.create_topic(topic, 1)
    out = program(headwater, broker.url, topic, wait=20.0)
    assert out.left == 0
    assert out.failed == []
    assert out.delivered == [(topic, 0, 0), (topic, 0, 1), (topic, 0, 2)]
    assert out.assignment == [(topic, 0)]
    assert out.consumed == [
        (
            topic,
            0,
            i,
            b"key",
            b"value-%d" % i,
            [("n", b"%d" % i)],
            (headwater.TIMESTAMP_CREATE_TIME, T0 + i),
        )
        for i in range(3)
    ]
    assert out.empty_batch == []
    assert all(isinstance(n, int) for n in out.served)


def test_the_same_program_runs_unchanged_with_confluent_kafka() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = unique("confluent-program")
    out = program(confluent_kafka, "127.0.0.1:1", topic, wait=1.0)  # nothing listens there
    # The same calls were accepted and answered in the same shapes, with nothing delivered.
    assert out.left == 3  # flush(): messages still waiting
    assert out.delivered == []
    # poll(): events served (librdkafka counts its connection errors here too)
    assert all(isinstance(n, int) for n in out.served)
    assert out.assignment == [(topic, 0)]
    assert out.consumed == []
    assert out.empty_batch == []
