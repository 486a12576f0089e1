"""Building the SparkSession the job runs in: Java, the Python interpreter, and Headwater's source.

Spark's launcher needs ``JAVA_HOME`` and starts Python workers with ``PYSPARK_PYTHON``; both are
set here from the running interpreter and the ``java`` on PATH when the caller has not set them,
so ``headwater validate`` works from the venv without any shell setup.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from headwater_spark.source import HeadwaterDataSource


def prepare_environment() -> None:
    """Set JAVA_HOME, PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON unless already set."""
    if not os.environ.get("JAVA_HOME"):
        java = shutil.which("java")
        if java:
            # .../jvm/java-17-openjdk-amd64/bin/java -> .../jvm/java-17-openjdk-amd64
            os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def build_session(
    master: str | None = "local[*]",
    app_name: str = "headwater-validate",
    shuffle_partitions: int = 4,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A session (or the active one) with the ``headwater`` format registered.

    Times are UTC so the ``date`` partition of outputs does not depend on the machine's zone.
    """
    prepare_environment()
    builder = SparkSession.builder
    if master is not None:  # None: spark-submit's --master (or spark-defaults) decides
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(HeadwaterDataSource)
    return spark
