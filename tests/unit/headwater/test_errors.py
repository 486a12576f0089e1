"""Errors keep their type and code across the wire."""

from __future__ import annotations

from headwater.errors import (
    BROKER,
    COMMON,
    MalformedRequestError,
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
