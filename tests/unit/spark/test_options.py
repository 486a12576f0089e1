"""Strict option parsing of the ``headwater`` format (source and sink), with Spark's names."""

from __future__ import annotations

import re

import pytest

from headwater_spark.options import OptionError, SinkOptions, SourceOptions, Subscription


def parse(options: dict[str, str], streaming: bool = False) -> SourceOptions:
    return SourceOptions.parse(
        {"kafka.bootstrap.servers": "127.0.0.1:8082", **options}, streaming=streaming
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "startingOffset": "earliest"}, "unknown option 'startingOffset'"),
        ({"subscribe": "t", "startingOffset": "earliest"}, "did you mean 'startingOffsets'?"),
        ({"subscribe": "t", "maxRecordsPerTrigger": "5"}, "did you mean 'maxOffsetsPerTrigger'?"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "option failOnDataLoss: expected true"),
        ({"subscribe": "t", "includeHeaders": "yes"}, "option includeHeaders: expected true"),
        ({"subscribe": "t", "minPartitions": "0"}, "option minPartitions: must be >= 1, got 0"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "x"}, "expected an integer, got 'x'"),
        ({"subscribe": "t", "maxTriggerDelay": "soon"}, "option maxTriggerDelay: expected"),
        ({"subscribe": "t", "startingTimestamp": "-5"}, "option startingTimestamp: must be >= 0"),
        ({}, "exactly one of 'subscribe', 'subscribePattern' or 'assign' (given: none)"),
        ({"subscribe": "t", "assign": '{"t": [0]}'}, "(given: ['subscribe', 'assign'])"),
        ({"assign": '{"t": [0, "x"]}'}, "option assign: partitions of topic 't'"),
        ({"assign": "[0, 2]"}, "option assign: expected JSON"),
        ({"subscribePattern": "orders-("}, "option subscribePattern: not a regular expression"),
        (
            {"subscribe": "t", "startingOffsetsByTimestampStrategy": "earliest"},
            "expected error or latest",
        ),
        (
            {"subscribe": "t", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "minOffsetsPerTrigger (10) is larger than maxOffsetsPerTrigger (5)",
        ),
    ],
)
def test_unknown_or_malformed_options_fail_with_their_name(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError) as raised:
        parse(options)
    assert message in str(raised.value)


def test_names_are_case_insensitive_as_in_spark_and_values_parse() -> None:
    # Spark hands options to Python sources lower-cased.
    options = SourceOptions.parse(
        {
            "brokers": "http://b0:8082, b1:8083",
            "assign": '{"orders": [2, 0, 2]}',
            "failondataloss": "FALSE",
            "maxoffsetspertrigger": "15",
            "maxtriggerdelay": "30s",
            "includeheaders": "true",
            "startingtimestamp": "4102444800000",
        },
        streaming=True,
    )
    assert options.brokers == ["http://b0:8082", "http://b1:8083"]
    assert options.subscription == Subscription(assigned=(("orders", 0), ("orders", 2)))
    assert options.fail_on_data_loss is False
    assert options.max_offsets_per_trigger == 15
    assert options.max_trigger_delay_ms == 30_000
    assert options.include_headers is True
    assert options.starting_timestamp == 4_102_444_800_000


def test_ending_offsets_are_refused_in_streaming_queries() -> None:
    with pytest.raises(OptionError, match="endingOffsets is not valid in streaming queries"):
        parse({"subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    assert parse({"subscribe": "t", "endingOffsets": "latest"}).ending_offsets == "latest"


def test_brokers_are_required_once() -> None:
    with pytest.raises(OptionError, match=re.escape("needs option 'kafka.bootstrap.servers'")):
        SourceOptions.parse({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="not both"):
        parse({"subscribe": "t", "brokers": "x:1"})


@pytest.mark.parametrize(
    ("brokers", "message"),
    [
        (" , ", "option brokers: at least one broker URL is required"),
        ("b:1, ftp://x", "option brokers: ' ftp://x' is not an http(s) URL or host:port"),
    ],
)
def test_broker_urls_that_do_not_parse_name_the_option(brokers: str, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        SourceOptions.parse({"subscribe": "t", "brokers": brokers}, streaming=False)
    assert str(refused.value) == message


def test_sink_options_and_producer_settings() -> None:
    sink = SinkOptions.parse(
        {"kafka.bootstrap.servers": "b:1", "topic": "out", "kafka.linger.ms": "20"}
    )
    assert sink.topic == "out"
    assert sink.producer_config() == {
        "bootstrap.servers": "http://b:1",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": "20",
    }
    with pytest.raises(OptionError, match=re.escape("did you mean 'kafka.linger.ms'")):
        SinkOptions.parse({"brokers": "b:1", "kafka.linger.msec": "5"})
    # Idempotence and acks are what the sink's guarantees rest on: not settable.
    with pytest.raises(OptionError, match=re.escape("unknown option 'kafka.enable.idempotence'")):
        SinkOptions.parse({"brokers": "b:1", "kafka.enable.idempotence": "false"})
