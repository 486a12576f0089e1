"""spark/submit.sh and the Scala/SQL registration, as a user runs them: separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.spark.conftest import Platform, avro_frame
from tests.spark.test_spark_validate import ORDER, order
from tests.support import ROOT

pytestmark = pytest.mark.spark


@pytest.mark.timeout(900)  # builds the packed environment (a fresh venv) before submitting
def test_submit_ships_a_packed_environment_gates_and_cleans_up(
    platform: Platform, tmp_path: Path
) -> None:
    topic = platform.create_topic("submit")
    schema_id = platform.register(f"{topic}-value", ORDER)
    platform.produce(topic, [avro_frame(schema_id, ORDER, order(i)) for i in range(8)] + [b"x"])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "HEADWATER_PACK_DIR": str(tmp_path / "pack"),
        "HEADWATER_PYTHON": sys.executable,
    }
    env.pop("SPARK_HOME", None)
    summary = tmp_path / "summary.json"
    command = [
        str(ROOT / "spark" / "submit.sh"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--",
        topic,
        "--brokers",
        platform.broker,
        "--registry",
        platform.registry,
        "--summary",
        f"file://{summary}",
        "--max-invalid",
        "0",
    ]
    run_in = tmp_path / "cwd"
    run_in.mkdir()
    done = subprocess.run(command, env=env, cwd=run_in, capture_output=True, text=True, timeout=900)
    errors = [line for line in done.stderr.splitlines() if "Error" in line or "error:" in line]
    # One invalid record, none allowed: the quality gate fails the run with exit code 3.
    assert done.returncode == 3, "\n".join(errors[:20]) or done.stderr[-3000:]
    # spark-submit merges the Python driver's stderr into its stdout.
    assert "quality gate failed: 1 invalid records, more than the 0 allowed" in done.stdout
    written = json.loads(summary.read_text())
    assert written["outcomes"] == {"invalid": 1, "valid": 8}
    assert written["gate"]["passed"] is False
    assert (tmp_path / "pack" / "executor-env.tar.gz").exists()
    # The trap removed what the script made: its temporary directory and ./environment.
    assert list(scratch.iterdir()) == []
    assert list(run_in.iterdir()) == []


def test_sql_and_the_jvm_reader_find_the_format_without_registration(
    platform: Platform, tmp_path: Path
) -> None:
    """A session that never calls spark.dataSource.register, used through SQL and through the
    JVM's DataFrameReader (what Scala and Java call): Spark's Python data source lookup finds
    pyspark_headwater.DefaultSource."""
    topic = platform.create_topic("shim")
    platform.produce(topic, [b"a", b"b", b"c"])
    script = textwrap.dedent(
        f"""
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sql(
            "CREATE TEMPORARY VIEW t USING headwater OPTIONS "
            "(`kafka.bootstrap.servers` '{platform.broker}', subscribe '{topic}')"
        )
        print("sql", spark.sql("SELECT count(*) AS n FROM t").collect()[0].n)
        jvm_df = (spark._jsparkSession.read().format("headwater")
                  .option("kafka.bootstrap.servers", "{platform.broker}")
                  .option("subscribe", "{topic}").load())
        print("jvm", jvm_df.count())
        spark.stop()
        """
    )
    # An editable install hides packages from pkgutil.iter_modules (an import hook, not a path),
    # so the test puts spark/ on the workers' path as a regular install would.
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "spark"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sql 3" in done.stdout
    assert "jvm 3" in done.stdout
