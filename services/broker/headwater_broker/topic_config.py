"""Topic names and per-topic configs: Kafka's validation rules, defaults and typed access.

Two kinds of config, one module: the storage configs (``RULES``: retention, segments, message
size, timestamps), typed for the log as :class:`TopicConfig`; and the replication configs
(``min.insync.replicas``, ``unclean.leader.election.enable``, ``replica.lag.time.max.ms``),
which the controller and the leaders read. :func:`validate` checks both, as the controller
accepts them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.errors import InvalidConfigError, InvalidTopicError

MAX_NAME_LENGTH = 249
_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1..249 of ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``."""
    if not name:
        raise InvalidTopicError("Topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name cannot be '{name}'")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is {len(name)} characters long; the maximum is {MAX_NAME_LENGTH}"
        )
    if not _NAME.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-' allowed"
        )


@dataclass(frozen=True)
class _Rule:
    default: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()


# Kafka's names, defaults and lower bounds (TopicConfig / LogConfig); ints are int32, longs int64.
RULES: dict[str, _Rule] = {
    "retention.ms": _Rule("604800000", -1, _LONG_MAX),
    "retention.bytes": _Rule("-1", -1, _LONG_MAX),
    "segment.bytes": _Rule("1073741824", 14, _INT_MAX),
    "segment.ms": _Rule("604800000", 1, _LONG_MAX),
    "max.message.bytes": _Rule("1048588", 0, _INT_MAX),
    "segment.index.bytes": _Rule("10485760", 8, _INT_MAX),
    "index.interval.bytes": _Rule("4096", 0, _INT_MAX),
    "cleanup.policy": _Rule("delete", choices=("delete",)),
    "message.timestamp.type": _Rule("CreateTime", choices=("CreateTime", "LogAppendTime")),
}


def validate_configs(configs: dict[str, Any]) -> dict[str, str]:
    """Check overrides against the rules and return them normalized to strings.

    Values may be given as strings (as Kafka's admin API does) or JSON integers.
    """
    normalized: dict[str, str] = {}
    for key, raw in configs.items():
        rule = RULES.get(key)
        if rule is None:
            raise InvalidConfigError(
                f"Unknown topic config '{key}'; supported: {', '.join(sorted(RULES))}"
            )
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise InvalidConfigError(f"Config '{key}' must be a string, got {type(raw).__name__}")
        value = str(raw).strip()
        if rule.choices:
            if value not in rule.choices:
                if key == "cleanup.policy" and value == "compact":
                    raise InvalidConfigError(
                        "cleanup.policy 'compact' is not supported; use 'delete'"
                    )
                raise InvalidConfigError(
                    f"Invalid value '{value}' for config '{key}': must be one of "
                    f"{', '.join(rule.choices)}"
                )
        else:
            try:
                number = int(value)
            except ValueError:
                raise InvalidConfigError(
                    f"Invalid value '{value}' for config '{key}': expected an integer"
                ) from None
            if rule.minimum is not None and number < rule.minimum:
                raise InvalidConfigError(
                    f"Invalid value {number} for config '{key}': must be at least {rule.minimum}"
                )
            if rule.maximum is not None and number > rule.maximum:
                raise InvalidConfigError(
                    f"Invalid value {number} for config '{key}': must be at most {rule.maximum}"
                )
            value = str(number)
        normalized[key] = value
    return normalized


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective configuration, typed for the storage engine."""

    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    max_message_bytes: int = 1_048_588
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    log_append_time: bool = False

    @classmethod
    def from_overrides(cls, overrides: dict[str, str]) -> TopicConfig:
        values = {key: overrides.get(key, rule.default) for key, rule in RULES.items()}
        return cls(
            retention_ms=int(values["retention.ms"]),
            retention_bytes=int(values["retention.bytes"]),
            segment_bytes=int(values["segment.bytes"]),
            segment_ms=int(values["segment.ms"]),
            max_message_bytes=int(values["max.message.bytes"]),
            segment_index_bytes=int(values["segment.index.bytes"]),
            index_interval_bytes=int(values["index.interval.bytes"]),
            log_append_time=values["message.timestamp.type"] == "LogAppendTime",
        )


def effective_configs(overrides: dict[str, str]) -> dict[str, str]:
    """Every config with its value: the override where one was given, else the default."""
    return {key: overrides.get(key, rule.default) for key, rule in RULES.items()}


# --- replication configs --------------------------------------------------------------------

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms"

REPLICATION_DEFAULTS = {
    MIN_INSYNC_REPLICAS: "1",
    UNCLEAN_LEADER_ELECTION: "false",
    # The broker's BROKER_REPLICA_LAG_TIME_MAX_MS applies when a topic sets none.
}


def _integer(key: str, raw: Any, minimum: int, maximum: int) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InvalidConfigError(f"Config '{key}' must be a string, got {type(raw).__name__}")
    try:
        number = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value '{raw}' for config '{key}': expected an integer"
        ) from None
    if not minimum <= number <= maximum:
        raise InvalidConfigError(
            f"Invalid value {number} for config '{key}': must be between {minimum} and {maximum}"
        )
    return str(number)


def _boolean(key: str, raw: Any) -> str:
    value = str(raw).strip().lower() if isinstance(raw, str | bool) else None
    if value not in ("true", "false"):
        raise InvalidConfigError(f"Invalid value '{raw}' for config '{key}': must be true or false")
    return value


def validate(configs: Mapping[str, Any]) -> dict[str, str]:
    """Overrides checked and normalized to strings; unknown keys are refused with the known ones."""
    storage = {k: v for k, v in configs.items() if k not in _REPLICATION}
    for key in storage:
        if key not in RULES:
            known = ", ".join(sorted([*RULES, *_REPLICATION]))
            raise InvalidConfigError(f"Unknown topic config '{key}'; supported: {known}")
    normalized = validate_configs(storage)
    for key, raw in configs.items():
        if key == MIN_INSYNC_REPLICAS:
            normalized[key] = _integer(key, raw, 1, _INT_MAX)
        elif key == REPLICA_LAG_TIME_MAX_MS:
            normalized[key] = _integer(key, raw, 1, _LONG_MAX)
        elif key == UNCLEAN_LEADER_ELECTION:
            normalized[key] = _boolean(key, raw)
    return normalized


def check_known(keys: Iterable[str]) -> None:
    for key in keys:
        if key not in RULES and key not in _REPLICATION:
            known = ", ".join(sorted([*RULES, *_REPLICATION]))
            raise InvalidConfigError(f"Unknown topic config '{key}'; supported: {known}")


def unclean_allowed(configs: Mapping[str, str]) -> bool:
    return configs.get(UNCLEAN_LEADER_ELECTION, "false") == "true"


_REPLICATION = frozenset({MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION, REPLICA_LAG_TIME_MAX_MS})
