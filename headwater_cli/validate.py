"""``headwater validate``: run the Spark validation job (spark/validate.py) on a topic."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from headwater_spark.validate import run

    return run(args)


def register(subparsers: Any) -> None:
    from headwater_spark.validate import add_arguments

    parser = subparsers.add_parser(
        "validate",
        help="validate a topic's Avro payloads against the registry with Spark",
        description=(
            "Validate every record of TOPIC against its subject's schema with PySpark: valid "
            "records to Parquet / a target topic, invalid ones to a dead-letter topic, a summary."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=_run)
