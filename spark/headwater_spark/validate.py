"""The validation job's command line: ``headwater validate`` and ``spark/submit.sh`` (spark-submit).

Validates every record of a topic against its subject's registered Avro schema, writes valid
records (Parquet and/or a target topic) and invalid ones (a dead-letter topic, with the reason in
headers), and prints and writes a summary. Batch mode covers an offset range; ``--stream`` runs a
Structured Streaming query that resumes from its checkpoint.

Exit codes: 0 done (and the quality gate passed), 3 the quality gate failed (``--max-invalid``,
``--max-invalid-ratio``), 2 bad arguments, 1 the job failed.

Importing this module does not import PySpark (the ``headwater`` CLI builds its parser from it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit spark/headwater_spark/validate.py): import ``headwater_spark``
    # as a package from spark/, not this directory's modules as top-level ones.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options (shared by the script and ``headwater validate``)."""
    env = os.environ
    parser.add_argument("topic", help="source topic to validate")
    parser.add_argument(
        "--brokers",
        default=env.get("HEADWATER_BROKERS", "http://127.0.0.1:8082"),
        help="comma-separated broker URLs (default $HEADWATER_BROKERS or http://127.0.0.1:8082)",
    )
    parser.add_argument(
        "--registry",
        default=env.get("HEADWATER_REGISTRY_URL", "http://127.0.0.1:8081"),
        help="schema registry URL (default $HEADWATER_REGISTRY_URL or http://127.0.0.1:8081)",
    )
    parser.add_argument("--subject", help="subject of the expected schema (default TOPIC-value)")
    parser.add_argument(
        "--expected-version",
        type=int,
        help="version of the subject to validate against (default: latest)",
    )
    parser.add_argument(
        "--naming-strategy",
        default="TopicName",
        help="subject naming strategy of values: TopicName (default), RecordName or "
        "TopicRecordName (several record types per topic)",
    )
    parser.add_argument(
        "--record-types",
        default="",
        help="record strategies: comma-separated record full names to expect (TopicRecordName "
        "default: every <topic>-<record> subject)",
    )
    parser.add_argument(
        "--keys",
        action="store_true",
        help="validate keys too, against the TOPIC-key subject",
    )
    parser.add_argument(
        "--max-invalid",
        type=int,
        help="quality gate: exit 3 when more records than this are invalid",
    )
    parser.add_argument(
        "--max-invalid-ratio",
        type=float,
        help="quality gate: exit 3 when a larger share of records (0..1) is invalid",
    )
    parser.add_argument(
        "--no-fail-on-data-loss",
        action="store_true",
        help="go on when retention removed offsets the run needs (default: fail)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help='earliest | latest | JSON {"topic": {"0": 42}} (default earliest)',
    )
    parser.add_argument(
        "--ending-offsets",
        default="latest",
        help="batch mode: latest | JSON, exclusive (default latest)",
    )
    parser.add_argument("--output", help="write valid records as Parquet here (by date)")
    parser.add_argument("--target-topic", help="produce valid records to this topic")
    parser.add_argument("--dead-letter-topic", help="produce invalid records to this topic")
    parser.add_argument(
        "--summary", help="write the summary as JSON to this path (any Hadoop path)"
    )
    parser.add_argument(
        "--state-dir",
        default="data/validate",
        help="where produced source ranges are recorded: a local or Hadoop path (s3a://, "
        "hdfs://) that outlives the driver (default data/validate)",
    )
    parser.add_argument("--stream", action="store_true", help="run as a streaming query")
    parser.add_argument("--checkpoint", help="streaming checkpoint directory (required)")
    parser.add_argument(
        "--trigger",
        default="availableNow",
        help="streaming: availableNow (process what is there, then stop) or seconds per batch",
    )
    parser.add_argument(
        "--timeout", type=float, help="streaming: stop after this many seconds (default: never)"
    )
    parser.add_argument(
        "--max-records-per-trigger", type=int, help="streaming: most records per micro-batch"
    )
    parser.add_argument(
        "--max-records-per-partition",
        type=int,
        default=1_000_000,
        help="most records one Spark task reads (default 1000000)",
    )
    parser.add_argument(
        "--min-partitions", type=int, default=0, help="at least this many Spark partitions"
    )
    parser.add_argument(
        "--master",
        help="Spark master: local[*] (default), spark://host:7077, k8s://https://host:443",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the job the arguments describe; print the summary table; 0 on success.

    The expected schemas are read from the registry before Spark starts, so a subject the
    registry does not have, or a registry that does not answer, raises in about a second, without
    a JVM (run under spark-submit, the JVM is already up; the SparkContext is still not built).
    """
    from headwater_spark.job import ExpectedSchemas, JobConfig, ValidationJob
    from headwater_spark.schemas import NamingStrategy
    from headwater_spark.session import build_session

    if args.stream and not args.checkpoint:
        print("validate: --stream needs --checkpoint DIR", file=sys.stderr)
        return 2
    try:
        strategy = NamingStrategy.parse(args.naming_strategy)
    except ValueError as exc:
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    if args.max_invalid_ratio is not None and not 0 <= args.max_invalid_ratio <= 1:
        print("validate: --max-invalid-ratio must be between 0 and 1", file=sys.stderr)
        return 2
    master = args.master
    if master is None and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = "local[*]"  # not under spark-submit, which passes its own --master
    conf = dict(item.split("=", 1) for item in args.conf)
    config = JobConfig(
        brokers=[b.strip() for b in args.brokers.split(",") if b.strip()],
        registry=args.registry,
        topic=args.topic,
        subject=args.subject,
        expected_version=args.expected_version,
        naming_strategy=strategy,
        record_types=[t.strip() for t in args.record_types.split(",") if t.strip()],
        validate_keys=args.keys,
        fail_on_data_loss=not args.no_fail_on_data_loss,
        max_invalid=args.max_invalid,
        max_invalid_ratio=args.max_invalid_ratio,
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        output_path=args.output,
        target_topic=args.target_topic,
        dead_letter_topic=args.dead_letter_topic,
        summary_path=args.summary,
        state_dir=args.state_dir,
        streaming=args.stream,
        checkpoint=args.checkpoint,
        available_now=args.trigger.lower() == "availablenow",
        trigger_seconds=5.0 if args.trigger.lower() == "availablenow" else float(args.trigger),
        timeout_seconds=args.timeout,
        max_records_per_trigger=args.max_records_per_trigger,
        max_records_per_partition=args.max_records_per_partition,
        min_partitions=args.min_partitions,
    )
    expected = ExpectedSchemas.resolve(config)
    spark = build_session(master, extra_conf=conf)
    if not config.min_partitions:
        config = replace(config, min_partitions=spark.sparkContext.defaultParallelism)
    job = ValidationJob(spark, config, expected)
    summary = job.run_stream() if config.streaming else job.run_batch()
    print(summary.table())
    failure = summary.gate_failure
    if failure is not None:
        print(f"validate: quality gate failed: {failure}", file=sys.stderr)
        return 3
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="validate.py",
        description="Validate a Headwater topic's Avro payloads against the schema registry.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
