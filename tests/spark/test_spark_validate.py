"""The validation job end to end: real Spark, real broker and registry processes."""

from __future__ import annotations

import datetime as dt
import json
import struct
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type stubs
import pytest
from pyspark.sql import SparkSession

from headwater_spark.job import JobConfig, ValidationJob
from headwater_spark.validate import main as validate_main
from tests.spark.conftest import Platform, avro_frame
from tests.support.schemas import ORDER as SHOP_ORDER

pytestmark = pytest.mark.spark

# The shared order with a timestamp: the Parquet output keeps logical types.
ORDER = {
    **SHOP_ORDER,
    "fields": [
        *SHOP_ORDER["fields"],
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
ROGUE = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "string"}],
}
AT = dt.datetime(2026, 11, 25, 12, 30, tzinfo=dt.UTC)


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "amount": i * 1.25,
        "status": "PAID" if i % 2 else "NEW",
        "note": None if i % 3 else f"note {i}",
        "at": AT,
    }


def crafted_values(order_id: int, rogue_id: int) -> tuple[list[bytes | None], dict[str, int]]:
    """A mix of valid and broken payloads and the exact count expected per reason."""
    values: list[bytes | None] = []
    good = [avro_frame(order_id, ORDER, order(i)) for i in range(30)]
    values += good[:10]
    values += [b"\x01" + good[0][1:], b"not avro at all", b"\x00\x00"]  # BAD_FRAMING x3
    values.append(None)  # a tombstone: BAD_FRAMING
    values += [b"\x00" + struct.pack(">I", 987654) + good[1][5:]] * 2  # UNKNOWN_SCHEMA_ID x2
    values += [good[2][:-4], good[3][:7], good[4][:6]]  # DECODE_ERROR (truncated) x3
    values.append(good[5] + b"\x00")  # DECODE_ERROR (trailing byte)
    bad_enum = bytearray(avro_frame(order_id, ORDER, order(1)))
    bad_enum[5 + 1 + 8] = 8  # id=1 (1 byte), amount (8 bytes), then enum index 4 of 2
    values.append(bytes(bad_enum))  # INVALID_RECORD
    values += [avro_frame(rogue_id, ROGUE, {"id": "x", "amount": "lots"})] * 2  # INCOMPATIBLE
    values += good[10:30]
    expected = {
        "BAD_FRAMING": 4,
        "UNKNOWN_SCHEMA_ID": 2,
        "DECODE_ERROR": 4,
        "INVALID_RECORD": 1,
        "INCOMPATIBLE_SCHEMA": 2,
    }
    return values, expected


def setup_topic(platform: Platform) -> tuple[str, list[bytes | None], dict[str, int], int]:
    topic = platform.create_topic("orders")
    order_id = platform.register(f"{topic}-value", ORDER)
    rogue_id = platform.register(f"{topic}-rogue-value", ROGUE)
    values, expected = crafted_values(order_id, rogue_id)
    platform.produce(topic, values)
    return topic, values, expected, order_id


def test_batch_job_counts_every_reason_and_writes_outputs(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    topic, values, expected, order_id = setup_topic(platform)
    dlq = platform.create_topic("orders-dlq")
    target = platform.create_topic("orders-valid")
    config = JobConfig(
        brokers=[platform.broker],
        registry=platform.registry,
        topic=topic,
        output_path=str(tmp_path / "valid"),
        target_topic=target,
        dead_letter_topic=dlq,
        summary_path=str(tmp_path / "summary.json"),
        state_dir=str(tmp_path / "state"),
        max_records_per_partition=16,
    )
    summary = ValidationJob(spark, config).run_batch()
    assert summary.outcomes == {"valid": 30, "invalid": 13}
    assert summary.reasons == expected
    assert summary.to_json()["partitions"] == [
        {"topic": topic, "partition": 0, "first_offset": 0, "last_offset": 42, "records": 43}
    ]

    # Valid rows, decoded, equal what was produced (Parquet partitioned by date).
    table = pq.read_table(tmp_path / "valid")
    rows = sorted(table.to_pylist(), key=lambda r: r["_offset"])
    assert [r["id"] for r in rows] == list(range(30))
    for row in rows:
        want = order(row["id"])
        assert row["amount"] == want["amount"]
        assert row["status"] == want["status"]
        assert row["note"] == want["note"]
        assert row["at"].replace(tzinfo=dt.UTC) == AT
        assert row["_schema_id"] == order_id
        assert row["_topic"] == topic
        assert str(row["date"]) == dt.datetime.now(dt.UTC).date().isoformat()
    assert [r["_offset"] for r in rows] == list(range(10)) + list(range(23, 43))

    # Invalid rows: unchanged, in the dead-letter topic, with the reason and source in headers.
    dead = platform.fetch_all(dlq)
    assert len(dead) == 13
    reasons: dict[str, int] = {}
    for record in dead:
        headers = {h["key"]: _b64(h["value"]) for h in record["headers"]}
        reason = headers["headwater.dlq.reason"].decode()
        reasons[reason] = reasons.get(reason, 0) + 1
        assert headers["headwater.source.topic"] == topic.encode()
        assert headers["headwater.source.partition"] == b"0"
        source_offset = int(headers["headwater.source.offset"])
        original = values[source_offset]
        assert (None if record["value"] is None else _b64(record["value"])) == original
        assert headers["headwater.dlq.message"]
    assert reasons == expected

    # Valid rows, unchanged, in the target topic (without dead-letter headers).
    forwarded = platform.fetch_all(target)
    assert sorted(_b64(r["value"]) for r in forwarded) == sorted(
        v for i, v in enumerate(values) if i < 10 or i >= 23 if v is not None
    )
    for record in forwarded:
        headers = {h["key"]: _b64(h["value"]) for h in record["headers"]}
        assert set(headers) == {
            "headwater.source.topic",
            "headwater.source.partition",
            "headwater.source.offset",
        }
        assert values[int(headers["headwater.source.offset"])] == _b64(record["value"])

    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["reasons"] == expected
    assert written["records"] == 43

    # Re-running the same range: same Parquet content, no second copy in the dead-letter topic.
    again = ValidationJob(spark, config).run_batch()
    assert again.reasons == expected
    assert pq.read_table(tmp_path / "valid").num_rows == 30
    assert len(platform.fetch_all(dlq)) == 13
    assert len(platform.fetch_all(target)) == 30


def test_counts_only_run_validates_inside_the_source_across_split_ranges(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    """No record outputs: the fused read (fetch + decode + validate in the source) counts
    exactly, even when ranges are split inside record batches and across partitions."""
    topic = platform.create_topic("orders-fused", partitions=2)
    order_id = platform.register(f"{topic}-value", ORDER)
    rogue_id = platform.register(f"{topic}-rogue-value", ROGUE)
    values, expected = crafted_values(order_id, rogue_id)
    platform.produce(topic, values, partition=0)
    platform.produce(topic, values[:20], partition=1)
    config = JobConfig(
        brokers=[platform.broker],
        registry=platform.registry,
        topic=topic,
        state_dir=str(tmp_path / "state"),
        max_records_per_partition=7,
    )
    summary = ValidationJob(spark, config).run_batch()
    # Partition 1 holds the first 20 payloads: 10 valid, 4 BAD_FRAMING, 2 UNKNOWN, 4 DECODE.
    assert summary.outcomes == {"valid": 40, "invalid": 23}
    assert summary.reasons == {
        **expected,
        "BAD_FRAMING": 8,
        "UNKNOWN_SCHEMA_ID": 4,
        "DECODE_ERROR": 8,
    }
    assert summary.to_json()["partitions"] == [
        {"topic": topic, "partition": 0, "first_offset": 0, "last_offset": 42, "records": 43},
        {"topic": topic, "partition": 1, "first_offset": 0, "last_offset": 19, "records": 20},
    ]


def test_expected_version_and_cli(
    spark: SparkSession, platform: Platform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, _values, expected, _ = setup_topic(platform)
    summary_path = tmp_path / "s.json"
    code = validate_main(
        [
            topic,
            "--brokers",
            platform.broker,
            "--registry",
            platform.registry,
            "--expected-version",
            "1",
            "--ending-offsets",
            json.dumps({topic: {"0": 20}}),
            "--summary",
            str(summary_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "BAD_FRAMING                   4" in out
    written = json.loads(summary_path.read_text())
    # Offsets 0..19: 10 valid, then the first 10 broken payloads of the crafted sequence.
    assert written["outcomes"] == {"invalid": 10, "valid": 10}
    assert written["reasons"] == {
        "BAD_FRAMING": 4,
        "UNKNOWN_SCHEMA_ID": 2,
        "DECODE_ERROR": 4,
    }
    assert written["partitions"][0]["last_offset"] == 19
    assert expected["BAD_FRAMING"] == 4


def test_streaming_job_resumes_from_its_checkpoint(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    topic, _values, expected, order_id = setup_topic(platform)
    config = JobConfig(
        brokers=[platform.broker],
        registry=platform.registry,
        topic=topic,
        streaming=True,
        checkpoint=str(tmp_path / "checkpoint"),
        output_path=str(tmp_path / "valid"),
        max_records_per_trigger=20,
        state_dir=str(tmp_path / "state"),
    )
    first = ValidationJob(spark, config).run_stream()
    assert first.batches == 3  # 43 records, 20 per trigger
    assert first.reasons == expected
    assert first.outcomes == {"valid": 30, "invalid": 13}

    platform.produce(topic, [avro_frame(order_id, ORDER, order(i)) for i in range(100, 105)])
    second = ValidationJob(spark, config).run_stream()
    assert second.outcomes == {"valid": 5, "invalid": 0}
    assert second.to_json()["partitions"][0]["first_offset"] == 43
    ids = sorted(pq.read_table(tmp_path / "valid").column("id").to_pylist())
    assert ids == [*range(30), *range(100, 105)]


def _b64(text: str) -> bytes:
    import base64

    return base64.b64decode(text)
