"""Summary building, the produced-range ledger, range naming and Avro-to-Spark type mapping."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from headwater.types import Offset, PartitionId
from headwater_spark.avro_types import converter, spark_type
from headwater_spark.files import LocalFiles
from headwater_spark.job import ranges_from_counts
from headwater_spark.ledger import RangeLedger
from headwater_spark.offsets import OffsetRange
from headwater_spark.parquet_output import range_id
from headwater_spark.summary import CountRow, QualityGate, Summary
from headwater_spark.topic_output import dead_letter_headers


def r(p: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, PartitionId(p), Offset(start), Offset(end))


def test_summary_counts_outcomes_reasons_and_offsets(tmp_path: Path) -> None:
    summary = Summary(gate=QualityGate(max_invalid=3))
    summary.add(
        [
            CountRow("t", 0, "valid", None, 8, 0, 9, 7),
            CountRow("t", 0, "invalid", "BAD_FRAMING", 2, 3, 7, None, "magic byte is 0x01"),
            CountRow("t", 1, "invalid", "DECODE_ERROR", 1, 4, 4, 7, "truncated"),
        ]
    )
    summary.add([CountRow("t", 0, "invalid", "BAD_FRAMING", 1, 10, 10, None, "too short")])
    summary.elapsed_s = 2.0
    expected = {
        "records": 12,
        "outcomes": {"invalid": 4, "valid": 8},
        "reasons": {"BAD_FRAMING": 3, "DECODE_ERROR": 1},
        "partitions": [
            {"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 10, "records": 11},
            {"topic": "t", "partition": 1, "first_offset": 4, "last_offset": 4, "records": 1},
        ],
        "elapsed_seconds": 2.0,
        "records_per_second": 6.0,
        "batches": 2,
        # Counts and samples per writer schema id (None: the payload had no readable id).
        "schemas": [
            {
                "schema_id": 7,
                "outcomes": {"invalid": 1, "valid": 8},
                "reasons": {"DECODE_ERROR": 1},
                "samples": [
                    {
                        "topic": "t",
                        "partition": 1,
                        "offset": 4,
                        "reason": "DECODE_ERROR",
                        "message": "truncated",
                    }
                ],
            },
            {
                "schema_id": None,
                "outcomes": {"invalid": 3},
                "reasons": {"BAD_FRAMING": 3},
                "samples": [
                    {
                        "topic": "t",
                        "partition": 0,
                        "offset": 3,
                        "reason": "BAD_FRAMING",
                        "message": "magic byte is 0x01",
                    },
                    {
                        "topic": "t",
                        "partition": 0,
                        "offset": 10,
                        "reason": "BAD_FRAMING",
                        "message": "too short",
                    },
                ],
            },
        ],
        "gate": {
            "max_invalid": 3,
            "max_invalid_ratio": None,
            "passed": False,
            "failure": "4 invalid records, more than the 3 allowed",
        },
        "outputs": {},
    }
    assert summary.to_json() == expected
    summary.write(LocalFiles(), str(tmp_path / "out" / "summary.json"))
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == expected
    table = summary.table()
    assert "BAD_FRAMING                   3" in table
    assert "t/0                                 0        10        11" in table
    assert "12 records in 2.00 s (6 records/s, 2 batch(es))" in table
    assert "7                             8        1  t/1@4 DECODE_ERROR: truncated" in table
    assert table.endswith("quality gate: FAILED: 4 invalid records, more than the 3 allowed")


def test_quality_gate_by_count_and_ratio() -> None:
    assert QualityGate(max_invalid=4).check(4, 100) is None
    assert QualityGate(max_invalid=0).check(1, 100) == "1 invalid records, more than the 0 allowed"
    assert QualityGate(max_invalid_ratio=0.05).check(5, 100) is None
    assert QualityGate(max_invalid_ratio=0.05).check(6, 100) == (
        "6.0000% of records invalid, more than the 5.0000% allowed"
    )
    assert QualityGate(max_invalid_ratio=0.0).check(0, 0) is None
    assert Summary().gate_failure is None


def test_ranges_from_counts_and_their_name() -> None:
    counts = [
        CountRow("t", 1, "valid", None, 5, 10, 14),
        CountRow("t", 1, "invalid", "X", 1, 15, 15),
        CountRow("t", 0, "valid", None, 3, 0, 2),
    ]
    assert ranges_from_counts(counts) == [r(0, 0, 3), r(1, 10, 16)]
    # The name depends on the ranges only, not their order, and ignores empty ranges.
    assert range_id([r(1, 10, 16), r(0, 0, 3)]) == range_id([r(0, 0, 3), r(1, 10, 16), r(2, 5, 5)])
    assert range_id([r(0, 0, 3)]) != range_id([r(0, 0, 4)])
    assert len(range_id([r(0, 0, 3)])) == 16


def test_ledger_merges_ranges_and_survives_reopening(tmp_path: Path) -> None:
    ledger = RangeLedger(LocalFiles(), str(tmp_path), "dlq")
    assert ledger.recorded() == []
    ledger.record([r(0, 0, 10), r(1, 5, 6)])
    ledger.record([r(0, 10, 20), r(0, 30, 40), r(0, 35, 50), r(2, 7, 7)])
    again = RangeLedger(LocalFiles(), str(tmp_path), "dlq")
    assert again.recorded() == [r(0, 0, 20), r(0, 30, 50), r(1, 5, 6)]
    assert RangeLedger(LocalFiles(), f"file://{tmp_path}", "other").recorded() == []


def test_dead_letter_headers() -> None:
    assert dead_letter_headers("BAD_FRAMING", "magic", "orders", 2, 41, None) == [
        ("headwater.dlq.reason", b"BAD_FRAMING"),
        ("headwater.dlq.message", b"magic"),
        ("headwater.source.topic", b"orders"),
        ("headwater.source.partition", b"2"),
        ("headwater.source.offset", b"41"),
    ]
    assert dead_letter_headers("X", "m", "t", 0, 1, 7)[-1] == ("headwater.dlq.schema-id", b"7")


SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": ["null", "double"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["A"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "blob", "type": {"type": "fixed", "name": "Blob", "size": 2}},
        {"name": "either", "type": ["int", "string"]},
        {"name": "again", "type": "Status"},
        {
            "name": "next",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Node",
                    "fields": [{"name": "child", "type": ["null", "Node"]}],
                },
            ],
        },
    ],
}


def test_avro_schema_maps_to_spark_types() -> None:
    data_type, nullable = spark_type(SCHEMA)
    assert not nullable
    assert data_type == StructType(
        [
            StructField("id", LongType(), False),
            StructField("amount", DoubleType(), True),
            StructField("status", StringType(), False),
            StructField("tags", ArrayType(StringType(), False), False),
            StructField("attrs", MapType(StringType(), LongType(), False), False),
            StructField("day", DateType(), False),
            StructField("at", TimestampType(), False),
            StructField("price", DecimalType(10, 2), False),
            StructField("ref", StringType(), False),
            StructField("blob", BinaryType(), False),
            StructField("either", StringType(), False),
            StructField("again", StringType(), False),
            # A recursive record: the recursion point holds JSON.
            StructField("next", StructType([StructField("child", StringType(), True)]), True),
        ]
    )


def test_converter_makes_values_fit_the_mapping() -> None:
    convert = converter(SCHEMA)
    assert convert is not None
    ref = uuid.UUID("12345678-1234-5678-1234-567812345678")
    value = {
        "id": 1,
        "either": 5,
        "ref": ref,
        "next": {"child": {"child": None}},
        "day": dt.date(2026, 1, 2),
    }
    out = convert(value)
    assert out["either"] == "5"
    assert out["ref"] == "12345678-1234-5678-1234-567812345678"
    assert out["next"] == {"child": '{"child": null}'}
    assert out["day"] == dt.date(2026, 1, 2)
    assert (
        converter({"type": "record", "name": "P", "fields": [{"name": "a", "type": "int"}]}) is None
    )
