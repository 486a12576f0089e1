"""``headwater validate``: run the Spark validation job (headwater_spark.validate) on a topic."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
from typing import Any

from headwater_cli.reporting import fail, run_reporting_errors

# What the job imports beyond the client: the ``spark`` extra, and Java for Spark itself.
SPARK_EXTRA = ("pyspark", "pyarrow", "pandas")
INSTALL_HINT = "pip install 'headwater[spark]' (in a checkout: .venv/bin/pip install -e '.[spark]')"


def missing_requirements() -> str | None:
    """Why the job cannot start here (one line), or None when it can."""
    absent = []
    for name in SPARK_EXTRA:
        try:
            importlib.import_module(name)  # the job imports them next anyway
        except ImportError:
            absent.append(name)
    if absent:
        return f"needs the spark extra ({', '.join(absent)} not installed): {INSTALL_HINT}"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "needs Java 17 for Spark: put `java` on PATH or set JAVA_HOME"
    return None


def _run(args: argparse.Namespace) -> int:
    reason = missing_requirements()
    if reason is not None:
        fail("validate", reason)
        return 1
    from headwater_spark.validate import run

    return run_reporting_errors("validate", lambda: run(args))


def register(subparsers: Any) -> None:
    from headwater_spark.validate import add_arguments

    parser = subparsers.add_parser(
        "validate",
        help="validate a topic's Avro payloads against the registry with Spark",
        description=(
            "Validate every record of TOPIC against its subject's schema with PySpark: valid "
            "records to Parquet / a target topic, invalid ones to a dead-letter topic, a summary. "
            f"Needs the spark extra and Java 17 ({INSTALL_HINT})."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=_run)
