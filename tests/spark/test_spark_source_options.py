"""The source as a drop-in for Spark's Kafka source: options, offsets, data loss, on Spark."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.conftest import Platform
from tests.spark.test_spark_source import produce_numbered, run_stream

pytestmark = pytest.mark.spark


def read(spark: SparkSession, platform: Platform, **options: str) -> DataFrame:
    return (
        spark.read.format("headwater")
        .option("kafka.bootstrap.servers", platform.broker)
        .options(**options)
        .load()
    )


def offsets(df: DataFrame) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_rows_have_spark_kafka_source_columns(spark: SparkSession, platform: Platform) -> None:
    topic = platform.create_topic("parity-cols")
    produce_numbered(platform, topic, 0, 0, 3)
    df = read(spark, platform, subscribe=topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    assert [r.timestampType for r in df.collect()] == [0, 0, 0]  # CreateTime
    with_headers = read(spark, platform, subscribe=topic, includeHeaders="true")
    assert with_headers.columns[-1] == "headers"


def test_assign_pattern_and_timestamps_select_what_they_name(
    spark: SparkSession, platform: Platform
) -> None:
    topic = platform.create_topic("parity-sel", partitions=3)
    for p in range(3):
        produce_numbered(platform, topic, p, 0, 4)
    assert offsets(read(spark, platform, assign=json.dumps({topic: [0, 2]}))) == [
        (0, i) for i in range(4)
    ] + [(2, i) for i in range(4)]
    pattern = read(spark, platform, subscribePattern=topic.replace("sel", "s.l"))
    assert pattern.count() == 12
    # Year 2100: no record at or after it -> an error by default, nothing with strategy latest.
    with pytest.raises(Exception, match="has no record at or after timestamp 4102444800000"):
        read(spark, platform, subscribe=topic, startingTimestamp="4102444800000").count()
    later = read(
        spark,
        platform,
        subscribe=topic,
        startingTimestamp="4102444800000",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert later.count() == 0
    # A timestamp before every record starts at the beginning; an ending one before all, empty.
    assert read(spark, platform, subscribe=topic, startingTimestamp="0").count() == 12
    assert read(spark, platform, subscribe=topic, endingTimestamp="0").count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffset": "earliest"}, "did you mean 'startingOffsets'?"),
        ({"failOnDataLoss": "maybe"}, "option failOnDataLoss: expected true or false"),
        ({"startingOffsets": "latest"}, "startingOffsets=latest is not valid for batch"),
        ({"endingOffsets": '{"T": {"0": -2}}'}, "-2 (earliest) for T/0 is not valid"),
        ({"endingOffsets": '{"T": {"0": 1000}}'}, "offset 1000 of T/0 is past the log end 5"),
        ({"endingOffsets": '{"T": {"0": -1, "7": 0}}'}, "not read by this query ['T/7']"),
    ],
)
def test_bad_options_fail_the_read_with_their_name(
    spark: SparkSession, platform: Platform, options: dict[str, str], message: str
) -> None:
    topic = platform.create_topic("parity-bad")
    produce_numbered(platform, topic, 0, 0, 5)
    options = {k: v.replace('"T"', json.dumps(topic)) for k, v in options.items()}
    expected = re.escape(message.replace("T/", f"{topic}/"))
    with pytest.raises(Exception, match=expected):
        read(spark, platform, subscribe=topic, **options).count()


def wait_for_log_start(platform: Platform, topic: str, at_least: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = httpx.get(f"{platform.broker}/topics/{topic}/partitions/0/offsets").json()
        if body["beginning_offset"] >= at_least:
            return int(body["beginning_offset"])
        time.sleep(0.1)
    raise AssertionError(f"retention did not move the log start of {topic}")


def test_data_loss_fails_or_skips_as_failOnDataLoss_says(  # noqa: N802  # Spark's option name
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    # Small segments and a small retention: old segments go as new records arrive.
    topic = platform.create_topic(
        "parity-loss", configs={"segment.bytes": "300", "retention.bytes": "600"}
    )
    produce_numbered(platform, topic, 0, 0, 10)
    checkpoint = tmp_path / "checkpoint"
    first: list[tuple[int, int, int]] = []
    run_stream(spark, platform, topic, checkpoint, first)
    assert [o for _, _, o in first] == list(range(10))
    for start in range(10, 200, 10):  # far past the checkpoint: retention drops offsets 10..
        produce_numbered(platform, topic, 0, start, 10)
    log_start = wait_for_log_start(platform, topic, 20)

    with pytest.raises(Exception, match="failOnDataLoss"):
        run_stream(spark, platform, topic, checkpoint, [])
    skipped: list[tuple[int, int, int]] = []
    run_stream(spark, platform, topic, checkpoint, skipped, failOnDataLoss="false")
    got = sorted(o for _, _, o in skipped)
    assert got[0] >= log_start
    assert got == list(range(got[0], 200))

    # Batch: an offset before the log start is data loss too, and skipped when allowed.
    starting = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="is before the log start"):
        read(spark, platform, subscribe=topic, startingOffsets=starting).count()
    allowed = read(
        spark, platform, subscribe=topic, startingOffsets=starting, failOnDataLoss="false"
    )
    rows = offsets(allowed)
    assert rows[0][1] >= log_start
    assert rows[-1] == (0, 199)


def test_streaming_min_partitions_and_trigger_limits(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    topic = platform.create_topic("parity-trig")
    produce_numbered(platform, topic, 0, 0, 40)
    partitions: list[int] = []

    def each(batch: DataFrame, batch_id: int) -> None:
        partitions.append(batch.rdd.getNumPartitions())
        sizes.append(batch.count())

    sizes: list[int] = []
    query = (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", platform.broker)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .option("minPartitions", "3")
        .load()
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(tmp_path / "c1"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert sizes == [15, 15, 10]
    assert partitions == [3, 3, 3]

    # minOffsetsPerTrigger holds a batch back until maxTriggerDelay passes.
    topic2 = platform.create_topic("parity-min")
    produce_numbered(platform, topic2, 0, 0, 4)
    seen: list[tuple[float, int]] = []
    started = time.monotonic()
    query = (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", platform.broker)
        .option("subscribe", topic2)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "10")
        .option("maxTriggerDelay", "8s")
        .load()
        .writeStream.foreachBatch(
            lambda b, _i: seen.append((time.monotonic() - started, b.count()))
        )
        .option("checkpointLocation", str(tmp_path / "c2"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while not any(n for _, n in seen) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        query.stop()
    first_data = next((at, n) for at, n in seen if n)
    assert first_data[1] == 4
    assert first_data[0] >= 8.0  # not before maxTriggerDelay
