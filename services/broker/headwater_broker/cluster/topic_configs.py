"""Topic config overrides the controller accepts: the broker's rules plus the replication ones.

The storage configs (retention, segments, ...) are validated by the broker's own
``headwater_broker.topic_config``; the replication configs below are the cluster's, with Kafka's
names and defaults, until they join that module's rules when the cluster is wired in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from headwater.errors import InvalidConfigError
from headwater_broker.topic_config import RULES, validate_configs

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms"

REPLICATION_DEFAULTS = {
    MIN_INSYNC_REPLICAS: "1",
    UNCLEAN_LEADER_ELECTION: "false",
    # The broker's BROKER_REPLICA_LAG_TIME_MAX_MS applies when a topic sets none.
}

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


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
