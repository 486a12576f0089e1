"""The SDK's methods have confluent-kafka's names, parameters and defaults where the two overlap.

confluent-kafka's classes are C types without ``inspect`` signatures; each method's docstring
opens with its signature (``.. py:function:: poll([timeout=None])``), which is what is compared
here with ``inspect.signature`` of Headwater's method: the same parameter names in the same
order, and the same defaults where confluent-kafka states one. Keyword-only parameters of ours
after those (``instance_id``, ``callback``) are additions confluent-kafka code never passes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

import headwater
from headwater import Consumer, Message, Producer, TopicPartition
from headwater.admin import AdminClient

confluent_kafka = pytest.importorskip("confluent_kafka")

_SIGNATURE = re.compile(r"\.\. py:(?:function|method|class):: *(\w+)\((.*)\)")
_NO_DEFAULT = object()

# (ours, confluent-kafka's) for every method both have.
CONSUMER_METHODS = [
    "assign",
    "commit",
    "committed",
    "consume",
    "get_watermark_offsets",
    "incremental_assign",
    "incremental_unassign",
    "list_topics",
    "offsets_for_times",
    "pause",
    "poll",
    "position",
    "resume",
    "seek",
    "subscribe",
]
PRODUCER_METHODS = ["flush", "list_topics", "poll", "produce"]


def documented(method: Any) -> list[tuple[str, object]]:
    """``[(name, default)]`` from a confluent-kafka docstring's ``.. py:function::`` line."""
    match = _SIGNATURE.search(method.__doc__ or "")
    assert match is not None, f"no signature in the docstring of {method!r}"
    params: list[tuple[str, object]] = []
    for raw in filter(None, (p.strip() for p in match.group(2).split(","))):
        name, _, default = raw.strip("[]").partition("=")
        params.append((name, eval(default) if default else _NO_DEFAULT))  # literals only
    return params


def ours(method: Callable[..., Any]) -> list[tuple[str, object]]:
    """``[(name, default)]`` of the positional-or-keyword parameters, ``self`` left out."""
    out: list[tuple[str, object]] = []
    for p in inspect.signature(method).parameters.values():
        if p.name == "self" or p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            continue
        out.append((p.name, _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default))
    return out


def same_shape(mine: Callable[..., Any], theirs: Any) -> None:
    expected = documented(theirs)
    actual = ours(mine)
    assert [n for n, _ in actual] == [n for n, _ in expected], mine.__qualname__
    for (name, default), (_, their_default) in zip(actual, expected, strict=True):
        # confluent-kafka writes "[timeout]" without a default for some optional parameters.
        if their_default is not _NO_DEFAULT:
            assert default == their_default, f"{mine.__qualname__}({name}=...)"


@pytest.mark.parametrize("name", CONSUMER_METHODS)
def test_consumer_methods_match(name: str) -> None:
    same_shape(getattr(Consumer, name), getattr(confluent_kafka.Consumer, name))


@pytest.mark.parametrize("name", PRODUCER_METHODS)
def test_producer_methods_match(name: str) -> None:
    same_shape(getattr(Producer, name), getattr(confluent_kafka.Producer, name))


def test_produce_takes_callback_as_on_delivery_alias() -> None:
    # confluent-kafka documents callback= as the alias of on_delivery (keyword only in use).
    assert "callback" in inspect.signature(Producer.produce).parameters
    assert "alias ``on_delivery``" in (confluent_kafka.Producer.produce.__doc__ or "")


def test_optional_parameters_have_defaults() -> None:
    """Where confluent-kafka marks a parameter optional (``[timeout]``), ours has a default."""
    for cls, theirs, names in (
        (Consumer, confluent_kafka.Consumer, CONSUMER_METHODS),
        (Producer, confluent_kafka.Producer, PRODUCER_METHODS),
    ):
        for name in names:
            doc = getattr(theirs, name).__doc__ or ""
            match = _SIGNATURE.search(doc)
            assert match is not None
            optional = re.findall(r"\[(\w+)", match.group(2))
            params = inspect.signature(getattr(cls, name)).parameters
            for param in optional:
                assert params[param].default is not inspect.Parameter.empty, f"{name}({param})"


def test_admin_list_topics_matches() -> None:
    from confluent_kafka.admin import AdminClient as TheirAdmin

    assert ours(AdminClient.list_topics) == [("topic", None), ("timeout", -1)]
    assert "list_topics" in dir(TheirAdmin)


def test_topic_partition_and_message_constructors_match() -> None:
    same_shape(TopicPartition.__init__, confluent_kafka.TopicPartition)
    # Message: confluent-kafka's constructor takes timestamp as (type, ms) and latency and
    # leader_epoch after it; ours stops at timestamp (the rest is not tracked).
    theirs = [n for n, _ in documented(confluent_kafka.Message)]
    assert [n for n, _ in ours(Message.__init__)] == theirs[: theirs.index("timestamp") + 1]


def test_constants_have_confluent_kafkas_values() -> None:
    for name in (
        "OFFSET_BEGINNING",
        "OFFSET_END",
        "OFFSET_STORED",
        "OFFSET_INVALID",
        "TIMESTAMP_NOT_AVAILABLE",
        "TIMESTAMP_CREATE_TIME",
        "TIMESTAMP_LOG_APPEND_TIME",
    ):
        assert getattr(headwater, name) == getattr(confluent_kafka, name), name


def test_topic_partition_behaves_as_confluent_kafkas() -> None:
    for kafka in (headwater, confluent_kafka):
        tp = kafka.TopicPartition("t", 1)
        assert (tp.topic, tp.partition, tp.offset, tp.error) == ("t", 1, -1001, None)
        assert kafka.TopicPartition("t").partition == -1
        # Equal and hashed by (topic, partition): the offset rides along.
        assert kafka.TopicPartition("t", 1, 5) == tp
        assert {kafka.TopicPartition("t", 1, 5): "x"}[tp] == "x"
        assert kafka.TopicPartition("t", 1) != kafka.TopicPartition("t", 2)
        assert sorted([kafka.TopicPartition("b", 0), kafka.TopicPartition("a", 3)])[0].topic == "a"
        tp.offset = 42  # mutable, as confluent-kafka's
        assert tp.offset == 42


def test_message_accessors_behave_as_confluent_kafkas() -> None:
    for kafka in (headwater, confluent_kafka):
        msg = kafka.Message(
            topic="t", partition=2, offset=7, key=b"k", value=b"value", headers=[("h", b"1")]
        )
        assert (msg.topic(), msg.partition(), msg.offset()) == ("t", 2, 7)
        assert (msg.key(), msg.value(), msg.headers(), msg.error()) == (
            b"k",
            b"value",
            [("h", b"1")],
            None,
        )
        assert len(msg) == 5
        assert kafka.Message(topic="t", partition=0).headers() is None
        assert kafka.Message(topic="t", partition=0).timestamp()[0] == 0  # NOT_AVAILABLE
        stamped = kafka.Message(topic="t", partition=0, timestamp=(1, 1_700_000_000_000))
        assert stamped.timestamp() == (kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000)
        msg.set_value(b"other")
        msg.set_key(None)
        assert (msg.value(), msg.key()) == (b"other", None)
