"""The validation job as a quality gate over several record types, keys and references."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type stubs
import pytest
from pyspark.sql import SparkSession

from headwater_spark.job import JobConfig, ValidationJob
from headwater_spark.schemas import NamingStrategy
from headwater_spark.validate import main as validate_main
from tests.spark.conftest import Platform, avro_frame
from tests.spark.test_spark_avro_functions import ADDRESS, CUSTOMER, REFUND
from tests.spark.test_spark_validate import ORDER, order, setup_topic

pytestmark = pytest.mark.spark


def test_record_types_keys_references_and_samples_per_writer_schema(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    topic = platform.create_topic("job-types")
    address_subject = f"{topic}-shop.Address"
    platform.register(address_subject, ADDRESS)
    refs = [{"name": "shop.Address", "subject": address_subject, "version": 1}]
    customer_id = platform.register(f"{topic}-shop.Customer", CUSTOMER, refs)
    refund_id = platform.register(f"{topic}-shop.Refund", REFUND)
    key_id = platform.register(f"{topic}-key", "string")
    order_id = platform.register(f"{unique_subject(topic)}", ORDER)  # a type this topic lacks
    named = {"shop.Address": ADDRESS}
    values: list[bytes | None] = [
        avro_frame(customer_id, CUSTOMER, {"id": 1, "home": {"city": "Oslo"}, "tier": None}, named),
        avro_frame(refund_id, REFUND, {"amount": 2.5}),
        avro_frame(customer_id, CUSTOMER, {"id": 2, "home": {"city": "Rome"}, "tier": "x"}, named),
        avro_frame(order_id, ORDER, order(1)),  # UNEXPECTED_RECORD_TYPE
        avro_frame(refund_id, REFUND, {"amount": 4.0}),  # but its key is not framed
    ]
    keys: list[bytes | None] = [avro_frame(key_id, "string", f"k{i}") for i in range(4)]
    keys.append(b"raw-key")
    platform.produce(topic, values, keys=keys)
    config = JobConfig(
        brokers=[platform.broker],
        registry=platform.registry,
        topic=topic,
        naming_strategy=NamingStrategy.TOPIC_RECORD_NAME,
        validate_keys=True,
        output_path=f"file://{tmp_path / 'valid'}",
        state_dir=f"file://{tmp_path / 'state'}",
        max_invalid_ratio=0.5,
    )
    job = ValidationJob(spark, config)
    summary = job.run_batch()
    assert summary.outcomes == {"valid": 3, "invalid": 2}
    assert summary.reasons == {"UNEXPECTED_RECORD_TYPE": 1, "KEY_BAD_FRAMING": 1}
    schemas = {s["schema_id"]: s for s in summary.to_json()["schemas"]}
    assert schemas[customer_id]["outcomes"] == {"valid": 2}
    assert schemas[refund_id]["outcomes"] == {"valid": 1, "invalid": 1}
    [refund_sample] = schemas[refund_id]["samples"]
    assert (refund_sample["offset"], refund_sample["reason"]) == (4, "KEY_BAD_FRAMING")
    assert refund_sample["message"].startswith("key: magic byte is 0x72")
    [order_sample] = schemas[order_id]["samples"]
    assert order_sample["offset"] == 3
    assert "record type shop.Order" in order_sample["message"]
    assert summary.gate_failure is None  # 40% invalid, 50% allowed
    # One Parquet dataset per record type, the reference's fields decoded as a struct.
    customers = pq.read_table(tmp_path / "valid" / "shop.Customer").to_pylist()
    assert sorted((r["id"], r["home"]["city"]) for r in customers) == [(1, "Oslo"), (2, "Rome")]
    refunds = pq.read_table(tmp_path / "valid" / "shop.Refund").to_pylist()
    assert [r["amount"] for r in refunds] == [2.5]


def unique_subject(topic: str) -> str:
    return f"{topic}-other-value"


def test_quality_gate_exits_non_zero_and_records_its_verdict(
    spark: SparkSession, platform: Platform, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, _values, _expected, _ = setup_topic(platform)  # 43 records, 13 invalid
    summary = tmp_path / "summary.json"
    common = [topic, "--brokers", platform.broker, "--registry", platform.registry]
    code = validate_main([*common, "--summary", str(summary), "--max-invalid", "12"])
    assert code == 3
    assert "quality gate failed: 13 invalid records, more than the 12 allowed" in (
        capsys.readouterr().err
    )
    assert json.loads(summary.read_text())["gate"] == {
        "max_invalid": 12,
        "max_invalid_ratio": None,
        "passed": False,
        "failure": "13 invalid records, more than the 12 allowed",
    }
    assert validate_main([*common, "--max-invalid", "13"]) == 0
    assert validate_main([*common, "--max-invalid-ratio", "0.30"]) == 3  # 30.2%
    assert validate_main([*common, "--max-invalid-ratio", "0.31"]) == 0


def test_streaming_parquet_adds_files_by_date_and_a_replayed_batch_replaces_its_own(
    spark: SparkSession, platform: Platform, tmp_path: Path
) -> None:
    topic, _values, _expected, order_id = setup_topic(platform)
    output = tmp_path / "valid"
    config = JobConfig(
        brokers=[platform.broker],
        registry=platform.registry,
        topic=topic,
        streaming=True,
        checkpoint=str(tmp_path / "checkpoint"),
        output_path=str(output),
        max_records_per_trigger=10,
        state_dir=f"file://{tmp_path / 'state'}",
    )
    first = ValidationJob(spark, config).run_stream()
    assert first.batches == 5  # 43 records, 10 per trigger
    # No directory per micro-batch: one date directory holding files named by source range.
    directories = sorted(p.name for p in output.iterdir() if not p.name.startswith("_"))
    assert len(directories) == 1
    assert directories[0].startswith("date=")
    # (Hadoop's local file system keeps a .<name>.crc beside each file; readers skip dot files.)
    files = sorted(p.name for p in (output / directories[0]).iterdir() if p.name[0] != ".")
    # Five ranges; offsets 10..19 are all invalid, so four hold valid rows, one name each.
    assert len({name.split("-")[0] for name in files}) == 4
    assert sorted(pq.read_table(output).column("id").to_pylist()) == list(range(30))

    # Replay the last micro-batch as a crash after writing would: drop its commit, run again.
    commits = sorted((tmp_path / "checkpoint" / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    for crc in (tmp_path / "checkpoint" / "commits").glob(f".{last.name}.crc"):
        crc.unlink()
    platform.produce(topic, [avro_frame(order_id, ORDER, order(i)) for i in range(100, 103)])
    again = ValidationJob(spark, config).run_stream()
    assert again.outcomes["valid"] >= 3
    ids = sorted(pq.read_table(output).column("id").to_pylist())
    assert ids == [*range(30), 100, 101, 102]  # the replayed batch's rows are there once
