"""The ``headwater`` sink: DataFrames and streams written as records, read back from the broker."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from tests.spark.conftest import Platform
from tests.spark.test_spark_source import produce_numbered

pytestmark = pytest.mark.spark


def b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_batch_write_routes_keys_partitions_and_headers(
    spark: SparkSession, platform: Platform
) -> None:
    topic = platform.create_topic("sink-batch", partitions=3)
    rows = [(f"k{i}", f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    df.write.format("headwater").option("kafka.bootstrap.servers", platform.broker).option(
        "topic", topic
    ).mode("append").save()
    stored = {
        p: [(b64(r["key"]), b64(r["value"])) for r in platform.fetch_all(topic, p)]
        for p in range(3)
    }
    assert sorted(kv for records in stored.values() for kv in records) == sorted(
        (k.encode(), v.encode()) for k, v in rows
    )
    # Keyed records land where Kafka's partitioner puts them.
    from headwater.records.partitioner import murmur2

    for p, records in stored.items():
        for key, _ in records:
            assert key is not None
            assert (murmur2(key) & 0x7FFFFFFF) % 3 == p

    # Explicit partitions, topic from a column, headers and a tombstone.
    other = platform.create_topic("sink-cols", partitions=2)
    explicit = spark.createDataFrame(
        [(other, 1, b"a", None, [("h", b"1")]), (other, 0, None, b"tomb", [])],
        "topic string, partition int, value binary, key binary, "
        "headers array<struct<key:string,value:binary>>",
    )
    explicit.write.format("headwater").option("brokers", platform.broker).mode("append").save()
    one = platform.fetch_all(other, 1)
    assert [
        (b64(r["value"]), [(h["key"], b64(h["value"])) for h in r["headers"]]) for r in one
    ] == [(b"a", [("h", b"1")])]
    zero = platform.fetch_all(other, 0)
    assert [(b64(r["key"]), r["value"]) for r in zero] == [(b"tomb", None)]


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ("vaule string", {"topic": "x"}, "unknown column 'vaule'"),
        ("value string", {}, "needs a 'topic' option or a 'topic' column"),
        ("value int", {"topic": "x"}, "column value must be BINARY or STRING, not int"),
        ("value string", {"topic": "x", "kafka.lingr.ms": "5"}, "did you mean 'kafka.linger.ms'"),
    ],
)
def test_the_sink_refuses_bad_columns_and_options(
    spark: SparkSession,
    platform: Platform,
    columns: str,
    options: dict[str, str],
    message: str,
) -> None:
    df = spark.createDataFrame([], columns)
    with pytest.raises(Exception, match=re.escape(message)):
        df.write.format("headwater").option("brokers", platform.broker).options(**options).mode(
            "append"
        ).save()


def test_stream_copies_a_topic_once_and_resumes(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    source = platform.create_topic("sink-src")
    target = platform.create_topic("sink-dst")
    produce_numbered(platform, source, 0, 0, 25)

    def copy() -> None:
        query = (
            spark.readStream.format("headwater")
            .option("kafka.bootstrap.servers", platform.broker)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "10")
            .load()
            .select("key", sf.concat(sf.col("value"), sf.lit(b"!")).alias("value"))
            .writeStream.format("headwater")
            .option("kafka.bootstrap.servers", platform.broker)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    copy()
    produce_numbered(platform, source, 0, 25, 5)
    copy()
    copied = [b64(r["value"]) for r in platform.fetch_all(target)]
    assert copied == [f"v-0-{i}!".encode() for i in range(30)]
