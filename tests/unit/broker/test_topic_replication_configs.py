"""Topic configs the controller accepts: the broker's storage rules plus replication configs."""

from __future__ import annotations

import pytest

from headwater.errors import InvalidConfigError
from headwater_broker.topic_config import check_known, unclean_allowed, validate


def test_storage_and_replication_configs_are_normalized_together() -> None:
    assert validate(
        {
            "retention.ms": 1000,
            "min.insync.replicas": " 2",
            "unclean.leader.election.enable": "TRUE",
            "replica.lag.time.max.ms": "5000",
        }
    ) == {
        "retention.ms": "1000",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "replica.lag.time.max.ms": "5000",
    }


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"min.insync.replicas": "0"}, "'min.insync.replicas': must be between 1 and"),
        ({"min.insync.replicas": "two"}, "expected an integer"),
        ({"unclean.leader.election.enable": "yes"}, "must be true or false"),
        ({"replica.lag.time.max.ms": True}, "must be a string, got bool"),
        ({"retention.ms": "-5"}, "must be at least -1"),
    ],
)
def test_invalid_values_are_refused(configs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        validate(configs)


def test_unknown_keys_are_refused_naming_every_supported_one() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        validate({"foo": "1"})
    assert refused.value.message.startswith("Unknown topic config 'foo'; supported: ")
    assert "min.insync.replicas" in refused.value.message
    assert "retention.ms" in refused.value.message
    with pytest.raises(InvalidConfigError, match="Unknown topic config 'bar'"):
        check_known(["retention.ms", "bar"])


def test_unclean_election_is_off_unless_set() -> None:
    assert not unclean_allowed({})
    assert not unclean_allowed({"unclean.leader.election.enable": "false"})
    assert unclean_allowed({"unclean.leader.election.enable": "true"})
