"""``headwater consume TOPIC``: print a topic's records to stdout, one value per line."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

import httpx

from headwater.admin import AdminClient
from headwater.consumer import Consumer
from headwater.errors import HeadwaterError
from headwater.message import Message
from headwater.topic_partition import OFFSET_INVALID, TopicPartition
from headwater_cli.endpoints import BROKERS, COORDINATOR, identify, misdirected
from headwater_cli.groups import add_coordinator_argument
from headwater_cli.produce import PROGRESS_INTERVAL
from headwater_cli.reporting import run_reporting_errors
from headwater_cli.topics import add_bootstrap_argument, broker_config


def topic_partitions(args: argparse.Namespace) -> list[int]:
    """The topic's partitions; a missing topic fails here, before any group is joined."""
    with AdminClient(broker_config(args)) as admin:
        return [p.partition for p in admin.describe_topic(args.topic).partitions]


def require_coordinator(urls: str) -> None:
    """Fail with one line unless a coordinator answers at one of ``urls``.

    Without it the group member would retry its heartbeats until ``--timeout`` and exit 0.
    """
    answers = [identify(url) for url in urls.split(",") if url.strip()]
    if any(a is not None and a.service == COORDINATOR.name for a in answers):
        return
    reason = misdirected(COORDINATOR, urls)
    if reason is None:
        reason = (
            f"cannot reach the coordinator at {urls}; is it running? "
            f"(give {COORDINATOR.flag} or set ${COORDINATOR.variable})"
        )
    raise ValueError(reason)


def make_consumer(args: argparse.Namespace, partitions: list[int]) -> Consumer:
    """The consumer for ``args``: a group member, or the given partitions from the flags' start."""
    config = broker_config(args) | {
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "max.poll.records": 5000,
    }
    if args.group:
        # Group mode: the coordinator assigns partitions; each printed batch is committed
        # right after it is written (at least once: a crash re-prints, never skips).
        config |= {"group.id": args.group, "coordinator.url": args.coordinator}
        config["enable.auto.commit"] = False
        consumer = Consumer(config)
        consumer.subscribe([args.topic])
        return consumer
    if args.partition is not None:
        partitions = [args.partition]
    consumer = Consumer(config)
    start = OFFSET_INVALID if args.offset is None else args.offset
    consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
    return consumer


def commit_after_output(consumer: Consumer) -> None:
    """Commit what was printed; a member that lost its partitions just goes on (at least once)."""
    try:
        consumer.commit(asynchronous=False)
    except (HeadwaterError, httpx.TransportError) as exc:
        print(f"headwater consume: commit failed ({exc}); continuing", file=sys.stderr)


def _format(message: Message, args: argparse.Namespace) -> bytes:
    parts = []
    if args.print_offset:
        parts.append(f"{message.partition()}:{message.offset()}".encode())
    if args.print_key:
        key = message.key()
        parts.append(b"null" if key is None else key)
    value = message.value()
    parts.append(b"null" if value is None else value)
    separator: str = args.separator
    return separator.encode().join(parts) + b"\n"


def run(args: argparse.Namespace) -> int:
    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # stop as Ctrl-C does: leave the group, print the count

    signal.signal(signal.SIGTERM, on_sigterm)

    def body() -> int:
        if args.group and (args.partition is not None or args.offset is not None):
            raise ValueError("--group cannot be combined with --partition or --offset")
        if args.offset is not None and args.offset < 0:
            raise ValueError(f"--offset must be >= 0, got {args.offset}")
        partitions = topic_partitions(args)
        if args.group:
            require_coordinator(args.coordinator)
        out = sys.stdout.buffer
        count = reported = 0
        started = last_report = time.monotonic()
        idle_deadline = None if args.timeout is None else started + args.timeout
        try:
            with make_consumer(args, partitions) as consumer:
                while args.max_messages is None or count < args.max_messages:
                    wait = 1.0
                    if idle_deadline is not None:
                        wait = idle_deadline - time.monotonic()
                        if wait <= 0:
                            break
                    wanted = 5000 if args.max_messages is None else args.max_messages - count
                    records = consumer.consume(min(wanted, 5000), min(wait, 1.0))
                    for record in records:
                        out.write(_format(record, args))
                    now = time.monotonic()
                    if records:
                        out.flush()
                        if args.group:
                            commit_after_output(consumer)
                        count += len(records)
                        if args.timeout is not None:
                            idle_deadline = now + args.timeout
                    # Also while idle, so the last line never lags what was printed.
                    if count != reported and now - last_report >= PROGRESS_INTERVAL:
                        # Progress goes to stderr so stdout stays pure records for pipes.
                        rate = count / (now - started)
                        print(f"... {count} records ({rate:,.0f}/s)", file=sys.stderr)
                        last_report, reported = now, count
        finally:
            # On Ctrl-C and SIGTERM too, as Kafka's console consumer does.
            print(f"Processed a total of {count} messages", file=sys.stderr)
        return 0

    targets = [(BROKERS, args.bootstrap_server)]
    if args.group:
        targets.append((COORDINATOR, args.coordinator))
    try:
        return run_reporting_errors("consume", body, *targets)
    except KeyboardInterrupt:
        return 0  # the way to stop a consumer; the count is printed


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="print a topic's records to stdout",
        description="Print a topic's records to stdout, one per line, until --max-messages, "
        "--timeout, Ctrl-C or SIGTERM; then print the count on stderr (and leave the group). "
        "Exits 1 with one line on stderr when the topic, a broker or the coordinator is missing.",
    )
    parser.add_argument("topic", help="topic to read")
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the log start, not the end"
    )
    parser.add_argument("--partition", type=int, help="read only this partition")
    parser.add_argument("--offset", type=int, help="start every read partition at this offset")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument(
        "--timeout", type=float, help="exit after this many seconds without a record"
    )
    parser.add_argument("--print-key", action="store_true", help="print KEY<sep>VALUE")
    parser.add_argument("--print-offset", action="store_true", help="prefix PARTITION:OFFSET<sep>")
    parser.add_argument("--separator", default="\t", help="field separator (default tab)")
    add_bootstrap_argument(parser)
    parser.add_argument("--group", help="consume as a member of this consumer group")
    add_coordinator_argument(parser)
    parser.set_defaults(func=run)
