"""The suite's own Spark JVM: the start-up flags tests/conftest.py sets reach it and take effect."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_the_session_jvm_runs_with_the_flags_of_spark_submit_opts(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    management = jvm.java.lang.management.ManagementFactory
    arguments = [str(argument) for argument in management.getRuntimeMXBean().getInputArguments()]
    given = os.environ["SPARK_SUBMIT_OPTS"].split()
    assert given  # tests/conftest.py's pytest_configure always sets something
    assert [option for option in given if option not in arguments] == [], arguments
    if "-XX:+UseSerialGC" in given:
        collectors = [str(bean.getName()) for bean in management.getGarbageCollectorMXBeans()]
        assert collectors == ["Copy", "MarkSweepCompact"]
