"""Topic name and config validation (Kafka's rules) and Accept/Content-Type negotiation."""

from __future__ import annotations

import pytest

from headwater.errors import InvalidConfigError, InvalidTopicError, NotAcceptableError
from headwater_broker.api.media import BATCHES, JSON, KAFKA_BINARY, KAFKA_JSON, negotiate
from headwater_broker.topic_config import (
    TopicConfig,
    effective_configs,
    validate_configs,
    validate_topic_name,
)


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is empty"),
        (".", "Topic name cannot be '.'"),
        ("..", "Topic name cannot be '..'"),
        ("x" * 250, "Topic name is 250 characters long; the maximum is 249"),
        (
            "a/b",
            "Topic name 'a/b' is illegal: only ASCII letters, digits, '.', '_' and '-' allowed",
        ),
        ("é", "Topic name 'é' is illegal: only ASCII letters, digits, '.', '_' and '-' allowed"),
    ],
)
def test_illegal_topic_names(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert info.value.message == message


def test_configs_normalize_and_type() -> None:
    overrides = validate_configs(
        {
            "retention.ms": 3600000,
            "segment.bytes": " 1024 ",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert overrides == {
        "retention.ms": "3600000",
        "segment.bytes": "1024",
        "message.timestamp.type": "LogAppendTime",
    }
    config = TopicConfig.from_overrides(overrides)
    assert (config.retention_ms, config.segment_bytes, config.log_append_time) == (
        3600000,
        1024,
        True,
    )
    assert effective_configs(overrides)["retention.bytes"] == "-1"


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"foo": "1"},
            "Unknown topic config 'foo'; supported: cleanup.policy, index.interval.bytes, "
            "max.message.bytes, message.timestamp.type, retention.bytes, retention.ms, "
            "segment.bytes, segment.index.bytes, segment.ms",
        ),
        (
            {"retention.ms": "soon"},
            "Invalid value 'soon' for config 'retention.ms': expected an integer",
        ),
        ({"retention.ms": "-2"}, "Invalid value -2 for config 'retention.ms': must be at least -1"),
        (
            {"segment.bytes": "13"},
            "Invalid value 13 for config 'segment.bytes': must be at least 14",
        ),
        (
            {"segment.bytes": str(2**31)},
            "Invalid value 2147483648 for config 'segment.bytes': must be at most 2147483647",
        ),
        ({"cleanup.policy": "compact"}, "cleanup.policy 'compact' is not supported; use 'delete'"),
        (
            {"message.timestamp.type": "Now"},
            "Invalid value 'Now' for config 'message.timestamp.type': must be one of "
            "CreateTime, LogAppendTime",
        ),
        ({"segment.ms": True}, "Config 'segment.ms' must be a string, got bool"),
    ],
)
def test_invalid_configs(configs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_configs(configs)
    assert info.value.message == message


FETCH = (JSON, KAFKA_JSON, KAFKA_BINARY, BATCHES)


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, JSON),
        ("*/*", JSON),
        (BATCHES, BATCHES),
        (f"{KAFKA_BINARY}, {JSON};q=0.5", KAFKA_BINARY),
        (f"{JSON};q=0.2, {BATCHES}", BATCHES),
        ("application/*", JSON),
        (f"text/html, {KAFKA_JSON}; q=0.9", KAFKA_JSON),
    ],
)
def test_accept_negotiation(accept: str | None, chosen: str) -> None:
    assert negotiate(accept, FETCH) == chosen


def test_unacceptable_accept_is_406() -> None:
    with pytest.raises(NotAcceptableError) as info:
        negotiate("text/html", FETCH)
    assert info.value.error_code == 406
