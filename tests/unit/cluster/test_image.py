"""The metadata image: applying changes in order, the events they produce, immutability."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.types import BrokerId
from headwater_broker.cluster.changes import Change, Record, TopicDeletion
from headwater_broker.cluster.image import (
    BrokerChanged,
    ChangeGapError,
    ControllerChanged,
    MetadataImage,
    PartitionChanged,
    TopicChanged,
    TopicDeleted,
)
from headwater_broker.cluster.state import (
    BrokerStateName,
    ChangeOffset,
    ControllerEpoch,
    ControllerInfo,
    LeaderEpoch,
    PartitionEpoch,
    TopicState,
)
from tests.unit.cluster.states import broker, partition


def log(*records: Record, start: int = 1) -> list[Change]:
    return [Change(ChangeOffset(start + i), ControllerEpoch(1), r) for i, r in enumerate(records)]


TOPIC = TopicState("t", "id-t", 2, {"retention.ms": "1000"})
P0 = partition([0, 1], number=0)
P1 = partition([1, 0], number=1)


def test_changes_build_the_image_and_describe_what_changed() -> None:
    image, events = MetadataImage.empty("c").apply(
        log(
            ControllerInfo(BrokerId(0), ControllerEpoch(1)),
            broker(0),
            broker(1),
            TOPIC,
            P0,
            P1,
        )
    )
    assert image.offset == 6
    assert image.controller == ControllerInfo(BrokerId(0), ControllerEpoch(1))
    assert image.controller_url() == "http://127.0.0.1:9000"
    assert [b.broker_id for b in image.active_brokers()] == [0, 1]
    assert image.partitions_of("t") == [P0, P1]
    assert image.leader_url("t", 1) == "http://127.0.0.1:9001"
    assert [type(e) for e in events] == [
        ControllerChanged,
        BrokerChanged,
        BrokerChanged,
        TopicChanged,
        PartitionChanged,
        PartitionChanged,
    ]
    created = events[4]
    assert isinstance(created, PartitionChanged)
    assert created.before is None
    assert created.leader_changed
    assert created.isr_changed

    moved = replace(
        P0, leader=BrokerId(1), leader_epoch=LeaderEpoch(1), partition_epoch=PartitionEpoch(1)
    )
    fenced = broker(0, BrokerStateName.FENCED, fenced_change=7)
    after, more = image.apply(log(fenced, moved, start=7))
    assert [type(e) for e in more] == [BrokerChanged, PartitionChanged]
    change = more[1]
    assert isinstance(change, PartitionChanged)
    assert change.leader_changed
    assert not change.isr_changed
    assert not change.replicas_changed
    assert after.led_by(1) == [moved, P1]
    assert not after.is_active(0)
    assert after.is_active(1, epoch=None)
    # The earlier image is untouched: readers holding it keep one consistent state.
    assert image.partition("t", 0) == P0
    assert image.broker(0) == broker(0)


def test_a_deleted_topic_takes_its_partitions_with_it() -> None:
    image, _ = MetadataImage.empty("c").apply(log(TOPIC, P0, P1))
    after, events = image.apply(log(TopicDeletion("t", "id-t"), start=4))
    assert events == [TopicDeleted(TOPIC, (P0, P1))]
    assert after.topic("t") is None
    assert after.partitions_of("t") == []
    # A deletion naming another incarnation of the topic changes nothing.
    again, _ = MetadataImage.empty("c").apply(log(TOPIC, P0))
    same, none = again.apply(log(TopicDeletion("t", "older-id"), start=3))
    assert none == []
    assert same.topic("t") == TOPIC
    assert same.offset == 3


def test_changes_already_applied_are_skipped_and_gaps_refused() -> None:
    image, _ = MetadataImage.empty("c").apply(log(TOPIC, P0))
    same, events = image.apply(log(TOPIC, P0))
    assert same is image
    assert events == []
    with pytest.raises(ChangeGapError):
        image.apply(log(P1, start=4))


def test_a_re_created_topic_replaces_the_old_one() -> None:
    image, _ = MetadataImage.empty("c").apply(log(TOPIC, P0, TopicDeletion("t", "id-t")))
    recreated = TopicState("t", "id-t2", 1)
    after, events = image.apply(log(recreated, start=4))
    assert events == [TopicChanged(None, recreated)]
    assert after.partitions_of("t") == []


records = st.one_of(
    st.builds(
        lambda b, s: broker(b, s),
        st.integers(0, 3),
        st.sampled_from(list(BrokerStateName)),
    ),
    st.builds(
        lambda n, c: TopicState(f"t{n}", f"id-t{n}", c),
        st.integers(0, 2),
        st.integers(1, 3),
    ),
    st.builds(
        lambda n, p, leader: partition([0, 1, 2], leader=leader, topic=f"t{n}", number=p),
        st.integers(0, 2),
        st.integers(0, 2),
        st.integers(-1, 2),
    ),
    st.builds(lambda n: TopicDeletion(f"t{n}", f"id-t{n}"), st.integers(0, 2)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=40), st.data())
def test_applying_in_any_batches_gives_the_same_image(
    recs: list[Record], data: st.DataObject
) -> None:
    changes = log(*recs)
    whole, _ = MetadataImage.empty("c").apply(changes)
    image = MetadataImage.empty("c")
    i = 0
    while i < len(changes):
        size = data.draw(st.integers(1, len(changes) - i))
        # Re-delivering rows already applied (a concurrent poll) must not matter either.
        overlap = data.draw(st.integers(0, i))
        image, _ = image.apply(changes[i - overlap : i + size])
        i += size
    assert image == whole
