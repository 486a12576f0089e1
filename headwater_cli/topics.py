"""``headwater topics create|list|describe|alter|delete``: topic administration."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater.admin import AdminClient
from headwater_cli.endpoints import BROKERS
from headwater_cli.properties import read_properties
from headwater_cli.reporting import run_reporting_errors

REQUEST_TIMEOUT = "HEADWATER_REQUEST_TIMEOUT_MS"
"""The variable behind ``--request-timeout-ms`` (docs/settings.md)."""


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server`` and ``--request-timeout-ms``, shared by every command that talks to
    brokers."""
    BROKERS.add_argument(parser)
    parser.add_argument(
        "--request-timeout-ms",
        type=_positive_ms,
        # A string default goes through ``type`` too: a bad variable is a usage error.
        default=os.environ.get(REQUEST_TIMEOUT) or "30000",
        metavar="MS",
        help="how long one request to the brokers may take, retries of an admin request "
        f"included (default: ${REQUEST_TIMEOUT}, else 30000)",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="a Kafka client properties file (security.protocol, ssl.ca.location, "
        "ssl.certificate.location, ssl.key.location), as Kafka's tools take",
    )


def broker_config(args: argparse.Namespace) -> dict[str, object]:
    """The SDK client settings every broker command's clients start from: the
    ``--command-config`` file's, then the bootstrap servers and timeout of the command line."""
    properties: dict[str, object] = {}
    if getattr(args, "command_config", None) is not None:
        properties.update(read_properties(args.command_config))
    return properties | {
        "bootstrap.servers": args.bootstrap_server,
        "request.timeout.ms": args.request_timeout_ms,
    }


def _positive_ms(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected milliseconds, 1 or more, got {text!r}")
    return value


def report(command: str, body: Callable[[], int], args: argparse.Namespace) -> int:
    """``run_reporting_errors`` for a command that talks to the brokers of ``args``."""
    return run_reporting_errors(command, body, (BROKERS, args.bootstrap_server))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(broker_config(args))


def _parse_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--config expects name=value, got {item!r}")
        configs[name.strip()] = value.strip()
    return configs


def _print_configs(configs: dict[str, str]) -> None:
    print("Configs:")
    for name, value in sorted(configs.items()):
        print(f"  {name}={value}")


def run_create(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            topic = admin.create_topic(
                args.topic, args.partitions, args.replication_factor, _parse_configs(args.config)
            )
        print(f"Created topic {topic.name} with {len(topic.partitions)} partition(s).")
        return 0

    return report("topics create", body, args)


def run_list(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            for name in admin.topic_names():
                print(name)
        return 0

    return report("topics list", body, args)


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
        _print_configs(topic.configs)
        return 0

    return report("topics describe", body, args)


def run_alter(args: argparse.Namespace) -> int:
    def body() -> int:
        configs = _parse_configs(args.config)
        if not (configs or args.delete_config or args.partitions is not None):
            raise ValueError("nothing to alter: give --partitions, --config or --delete-config")
        changed: list[str] = []

        def changes(lines: list[str]) -> None:
            # Printed as each step lands, so a refused later step still shows what was done.
            if lines and not changed:
                print(f"Altered topic {args.topic}:")
            for line in lines:
                print(f"  {line}")
            changed.extend(lines)

        with _admin(args) as admin:
            before = admin.describe_topic(args.topic)
            # Configs first: a refused value (42202) leaves the whole topic as it was.
            if configs or args.delete_config:
                after = admin.alter_topic_configs(args.topic, configs, args.delete_config)
                changes(
                    [
                        f"{name}={value} (was {before.configs.get(name)})"
                        for name, value in sorted(after.configs.items())
                        if before.configs.get(name) != value
                    ]
                )
            if args.partitions is not None:
                grown = admin.create_partitions(args.topic, args.partitions)
                changes([f"partitions={len(grown.partitions)} (was {len(before.partitions)})"])
        if not changed:
            print(f"Topic {args.topic} unchanged.")
        return 0

    return report("topics alter", body, args)


def run_delete(args: argparse.Namespace) -> int:
    def body() -> int:
        with _admin(args) as admin:
            admin.delete_topic(args.topic)
        print(f"Deleted topic {args.topic}.")
        return 0

    return report("topics delete", body, args)


def register(subparsers: Any) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics")
    commands = topics.add_subparsers(
        dest="topics_command", metavar="ACTION", required=True, help="what to do"
    )

    create = commands.add_parser("create", help="create a topic")
    create.add_argument("topic", help="name of the topic to create")
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
    describe.add_argument("topic", help="name of the topic to describe")
    describe.set_defaults(func=run_describe)

    alter = commands.add_parser(
        "alter",
        help="set or delete configs, add partitions",
        description="Change a topic in place: set and delete configs in one change (validated "
        "as at creation; a deleted config returns to its default), and grow the partition "
        "count. Prints each value that changed.",
    )
    alter.add_argument("topic", help="name of the topic to alter")
    alter.add_argument(
        "--partitions", type=int, help="new total partition count (grow only, as Kafka)"
    )
    alter.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a topic config, such as retention.ms=3600000 (repeatable)",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="NAME",
        help="remove a config override, back to its default (repeatable)",
    )
    alter.set_defaults(func=run_alter)

    delete = commands.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("topic", help="name of the topic to delete")
    delete.set_defaults(func=run_delete)

    for parser in (create, listing, describe, alter, delete):
        add_bootstrap_argument(parser)
