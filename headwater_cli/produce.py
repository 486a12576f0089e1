"""``headwater produce TOPIC``: send lines from stdin or a file as records, optionally keyed."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from headwater.message import Message
from headwater.producer import Producer
from headwater_cli.topics import add_bootstrap_argument, broker_config, report

PROGRESS_INTERVAL = 1.0  # seconds between progress lines on stderr


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for line in stream:
        yield line.rstrip(b"\r\n") if line.endswith(b"\n") else line


class _Tally:
    """Delivery outcomes, counted by the delivery callback (run by poll() and flush())."""

    def __init__(self) -> None:
        self.partitions: Counter[int] = Counter()
        self.errors: Counter[str] = Counter()

    def __call__(self, error: BaseException | None, message: Message) -> None:
        if error is not None:
            self.errors[str(error)] += 1
        else:
            self.partitions[message.partition()] += 1


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        separator = args.key_separator.encode() if args.key_separator is not None else None
        config = broker_config(args) | {
            "compression.type": args.compression,
            "acks": args.acks,
            "linger.ms": args.linger_ms,
        }
        if args.acks not in ("all", "-1"):
            config["enable.idempotence"] = False
        tally = _Tally()
        produced = 0
        started = last_report = time.monotonic()
        with Producer(config) as producer:
            source = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
            try:
                for number, line in enumerate(_lines(source), start=1):
                    key = None
                    value = line
                    if separator is not None:
                        key, sep, value = line.partition(separator)
                        if not sep:
                            raise ValueError(
                                f"line {number} has no key separator {args.key_separator!r}"
                            )
                    producer.produce(
                        args.topic,
                        value,
                        key=key,
                        partition=-1 if args.partition is None else args.partition,
                        on_delivery=tally,
                    )
                    producer.poll(0)  # run the delivery callbacks that are due
                    produced += 1
                    now = time.monotonic()
                    if now - last_report >= PROGRESS_INTERVAL:
                        last_report = now
                        rate = produced / (now - started)
                        print(f"... {produced} records ({rate:,.0f}/s)", file=sys.stderr)
            finally:
                if source is not sys.stdin.buffer:
                    source.close()
                producer.flush()
        elapsed = max(time.monotonic() - started, 1e-9)
        delivered = sum(tally.partitions.values())
        spread = ", ".join(f"{p}: {n}" for p, n in sorted(tally.partitions.items()))
        print(
            f"Produced {delivered} record(s) to {args.topic} in {elapsed:.2f}s "
            f"({delivered / elapsed:,.0f}/s); per partition {{{spread}}}"
        )
        for message, count in tally.errors.items():
            print(f"headwater produce: {count} record(s) failed: {message}", file=sys.stderr)
        return 1 if tally.errors else 0

    return report("produce", body, args)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "produce", help="send lines from stdin or a file to a topic, one record per line"
    )
    parser.add_argument("topic", help="topic to send the records to")
    parser.add_argument("--file", type=Path, help="read lines from this file instead of stdin")
    parser.add_argument(
        "--key-separator",
        help="split each line at the first SEP into key and value (e.g. ':')",
        metavar="SEP",
    )
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    parser.add_argument(
        "--compression",
        default="none",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="batch compression (default none)",
    )
    parser.add_argument(
        "--acks",
        default="all",
        choices=["0", "1", "all", "-1"],
        help="when the broker answers: 0 never, 1 once written, all (= -1) once in sync; "
        "idempotence needs all (default all)",
    )
    parser.add_argument("--linger-ms", type=int, default=5, help="batching delay (default 5)")
    add_bootstrap_argument(parser)
    parser.set_defaults(func=run)
