"""Errors keep their type and code across the wire."""

from __future__ import annotations

from headwater.errors import (
    BROKER,
    COMMON,
    MalformedRequestError,
    NotControllerError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicNotFoundError,
    UnknownServerError,
)


def test_broker_codes_round_trip_through_the_body() -> None:
    error = OffsetOutOfRangeError("offset 7 is out of range; valid range is [0, 5]")
    rebuilt = BROKER.from_body(error.http_status, error.to_body())
    assert type(rebuilt) is OffsetOutOfRangeError
    assert rebuilt.message == "offset 7 is out of range; valid range is [0, 5]"
    assert (error.http_status, error.error_code, error.kafka_code) == (416, 41601, 1)


def test_common_codes_are_found_from_every_family() -> None:
    assert BROKER.for_code(40002) is MalformedRequestError
    assert BROKER.for_code(40401) is TopicNotFoundError
    assert COMMON.for_code(40401) is UnknownServerError


def test_unknown_body_becomes_unknown_server_error_with_the_status() -> None:
    error = BROKER.from_body(502, "<html>bad gateway</html>")
    assert isinstance(error, UnknownServerError)
    assert "HTTP 502" in error.message


def test_not_leader_and_not_controller_keep_their_fields_over_the_wire() -> None:
    sent = NotLeaderOrFollowerError(
        "Broker 0 does not lead partition 1", leader_id=2, leader_url="http://b2", leader_epoch=4
    )
    got = BROKER.from_body(421, sent.to_body())
    assert isinstance(got, NotLeaderOrFollowerError)
    assert (got.leader_id, got.leader_url, got.leader_epoch) == (2, "http://b2", 4)
    assert got.message == "Broker 0 does not lead partition 1"
    controller = BROKER.from_body(
        503, NotControllerError("not here", controller_id=1, controller_url="http://b1").to_body()
    )
    assert isinstance(controller, NotControllerError)
    assert (controller.controller_id, controller.controller_url) == (1, "http://b1")
    odd = BROKER.from_body(421, {"error_code": 42101, "message": "m", "leader_id": "x"})
    assert isinstance(odd, NotLeaderOrFollowerError)
    assert (odd.leader_id, odd.leader_url, odd.leader_epoch) == (-1, None, -1)
