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


def test_not_leader_keeps_the_leader_named_in_its_body() -> None:
    error = NotLeaderOrFollowerError(
        "broker 1 does not lead t/0", leader_id=2, leader_url="http://b2:8083", leader_epoch=7
    )
    rebuilt = BROKER.from_body(421, error.to_body())
    assert isinstance(rebuilt, NotLeaderOrFollowerError)
    assert (rebuilt.leader_id, rebuilt.leader_url, rebuilt.leader_epoch) == (
        2,
        "http://b2:8083",
        7,
    )
    assert rebuilt.message == "broker 1 does not lead t/0"


def test_not_leader_without_a_leader_in_its_body_names_none() -> None:
    rebuilt = BROKER.from_body(
        421, {"error_code": 42101, "message": "m", "leader_id": None, "leader_url": None}
    )
    assert isinstance(rebuilt, NotLeaderOrFollowerError)
    assert (rebuilt.leader_id, rebuilt.leader_url, rebuilt.leader_epoch) == (-1, None, -1)


def test_not_controller_keeps_the_controller_named_in_its_body() -> None:
    error = NotControllerError("not me", controller_id=3, controller_url="http://b3:8084")
    rebuilt = BROKER.from_body(503, error.to_body())
    assert isinstance(rebuilt, NotControllerError)
    assert (rebuilt.controller_id, rebuilt.controller_url) == (3, "http://b3:8084")
