"""``headwater topics create|list|describe|delete``: topic administration from the command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import httpx

from headwater.admin import AdminClient
from headwater.errors import HeadwaterError

DEFAULT_BROKERS = "http://127.0.0.1:8082"


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server``, shared by every command that talks to brokers."""
    parser.add_argument(
        "--bootstrap-server",
        default=os.environ.get("HEADWATER_BROKERS", DEFAULT_BROKERS),
        help="broker URL(s), comma-separated (default: $HEADWATER_BROKERS or %(default)s)",
    )


def run_reporting_errors(command: str, body: Callable[[], int]) -> int:
    """Run ``body``; typed errors and unreachable brokers become one line on stderr, exit 1."""
    try:
        return body()
    except HeadwaterError as exc:
        print(f"headwater {command}: {exc.message} (error {exc.error_code})", file=sys.stderr)
    except httpx.TransportError as exc:
        target = exc.request.url if exc.request else "the broker"
        print(f"headwater {command}: cannot reach {target}: {exc}", file=sys.stderr)
    except ValueError as exc:
        print(f"headwater {command}: {exc}", file=sys.stderr)
    return 1


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient({"bootstrap.servers": args.bootstrap_server})


def _parse_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--config expects name=value, got {item!r}")
        configs[name.strip()] = value.strip()
    return configs


def run_create(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            topic = admin.create_topic(
                args.topic, args.partitions, args.replication_factor, _parse_configs(args.config)
            )
        print(f"Created topic {topic.name} with {len(topic.partitions)} partition(s).")
        return 0

    return run_reporting_errors("topics create", body)


def run_list(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            for name in admin.list_topics():
                print(name)
        return 0

    return run_reporting_errors("topics list", body)


def run_describe(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            topic = admin.describe_topic(args.topic)
        print(f"Topic: {topic.name}\tPartitions: {len(topic.partitions)}")
        rows: list[tuple[Any, ...]] = [("PARTITION", "LEADER", "REPLICAS", "BEGIN", "END")]
        for p in topic.partitions:
            replicas = ",".join(str(r.broker) for r in p.replicas) or "-"
            rows.append((p.partition, p.leader, replicas, p.beginning_offset, p.end_offset))
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        print("Configs:")
        for name, value in sorted(topic.configs.items()):
            print(f"  {name}={value}")
        return 0

    return run_reporting_errors("topics describe", body)


def run_delete(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            admin.delete_topic(args.topic)
        print(f"Deleted topic {args.topic}.")
        return 0

    return run_reporting_errors("topics delete", body)


def register(subparsers: Any) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe and delete topics")
    commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    create = commands.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, help="partition count (broker default: 1)")
    create.add_argument("--replication-factor", type=int, help="replicas per partition")
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="topic config such as retention.ms=86400000 (repeatable)",
    )
    create.set_defaults(func=run_create)

    listing = commands.add_parser("list", help="list topic names")
    listing.set_defaults(func=run_list)

    describe = commands.add_parser("describe", help="partitions, offsets and configs of a topic")
    describe.add_argument("topic")
    describe.set_defaults(func=run_describe)

    delete = commands.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("topic")
    delete.set_defaults(func=run_delete)

    for parser in (create, listing, describe, delete):
        add_bootstrap_argument(parser)
