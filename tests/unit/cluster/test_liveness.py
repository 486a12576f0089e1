"""Broker states from session rows: registrations recorded fenced, fencing by heartbeat age
(with the database-contact grace), unfencing once caught up."""

from __future__ import annotations

from dataclasses import replace

from headwater.types import BrokerId
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.liveness import broker_transitions
from headwater_broker.cluster.session import SessionRow
from headwater_broker.cluster.state import (
    BrokerEpoch,
    BrokerState,
    BrokerStateName,
    ChangeOffset,
)
from tests.unit.cluster.states import broker

NOW = 1_000_000
TIMEOUT = 1500


def session(broker_id: int, epoch: int = 1, age_ms: int = 100, applied: int = 50) -> SessionRow:
    return SessionRow(
        broker_id=BrokerId(broker_id),
        incarnation=f"inc-{broker_id}-{epoch}",
        epoch=BrokerEpoch(epoch),
        url=f"http://127.0.0.1:{9000 + broker_id}",
        rack="r1",
        heartbeat_ms=NOW - age_ms,
        applied_change=ChangeOffset(applied),
    )


def image(*states: BrokerState) -> MetadataImage:
    base = MetadataImage.empty("cluster")
    return replace(base, brokers={b.broker_id: b for b in states}, offset=ChangeOffset(40))


def test_a_new_registration_is_recorded_fenced_at_its_own_change() -> None:
    out = broker_transitions(image(), [session(0), session(1)], NOW, TIMEOUT, True, 41)
    assert [(b.broker_id, b.state, b.fenced_change, b.rack) for b in out] == [
        (0, BrokerStateName.FENCED, 41, "r1"),
        (1, BrokerStateName.FENCED, 42, "r1"),
    ]


def test_a_restarted_broker_is_recorded_again_fenced_even_if_it_was_active() -> None:
    recorded = broker(0, epoch=1)
    out = broker_transitions(image(recorded), [session(0, epoch=2)], NOW, TIMEOUT, True, 41)
    assert len(out) == 1
    assert (out[0].epoch, out[0].state, out[0].incarnation) == (
        2,
        BrokerStateName.FENCED,
        "inc-0-2",
    )


def test_a_stale_heartbeat_fences_only_after_the_contact_grace() -> None:
    recorded = broker(0)
    stale = session(0, age_ms=TIMEOUT + 1)
    assert broker_transitions(image(recorded), [stale], NOW, TIMEOUT, False, 41) == []
    out = broker_transitions(image(recorded), [stale], NOW, TIMEOUT, True, 41)
    assert [(b.state, b.fenced_change) for b in out] == [(BrokerStateName.FENCED, 41)]
    # Exactly at the timeout is still alive.
    edge = session(0, age_ms=TIMEOUT)
    assert broker_transitions(image(recorded), [edge], NOW, TIMEOUT, True, 41) == []


def test_a_released_session_is_fenced_at_once_even_during_the_grace() -> None:
    recorded = broker(0, state=BrokerStateName.SHUTTING_DOWN)
    released = replace(session(0), heartbeat_ms=0)
    out = broker_transitions(image(recorded), [released], NOW, TIMEOUT, False, 41)
    assert [b.state for b in out] == [BrokerStateName.FENCED]


def test_a_fenced_broker_is_unfenced_once_it_has_applied_its_fencing_change() -> None:
    fenced = broker(0, state=BrokerStateName.FENCED, fenced_change=45)
    behind = session(0, applied=44)
    assert broker_transitions(image(fenced), [behind], NOW, TIMEOUT, True, 50) == []
    caught_up = session(0, applied=45)
    out = broker_transitions(image(fenced), [caught_up], NOW, TIMEOUT, True, 50)
    assert [(b.state, b.fenced_change) for b in out] == [(BrokerStateName.ACTIVE, 45)]
    # Caught up but silent: stays fenced.
    silent = session(0, applied=45, age_ms=TIMEOUT + 1)
    assert broker_transitions(image(fenced), [silent], NOW, TIMEOUT, True, 50) == []


def test_offsets_follow_the_order_of_the_records() -> None:
    a = broker(0, state=BrokerStateName.FENCED, fenced_change=3)
    b = broker(1)
    sessions = [session(0, applied=10), session(1, age_ms=5000), session(2)]
    out = broker_transitions(image(a, b), sessions, NOW, TIMEOUT, True, 100)
    assert [(x.broker_id, x.state) for x in out] == [
        (0, BrokerStateName.ACTIVE),
        (1, BrokerStateName.FENCED),
        (2, BrokerStateName.FENCED),
    ]
    assert [out[1].fenced_change, out[2].fenced_change] == [101, 102]
