"""``headwater groups list|describe|lag|reset|delete``: consumer group administration."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from headwater.groups.client import CoordinatorClient
from headwater_cli.endpoints import COORDINATOR
from headwater_cli.reporting import run_reporting_errors


def add_coordinator_argument(parser: argparse.ArgumentParser) -> None:
    """``--coordinator``, shared by every command that talks to the coordinator."""
    COORDINATOR.add_argument(parser)


def report(command: str, body: Callable[[], int], args: argparse.Namespace) -> int:
    """``run_reporting_errors`` for a command that talks to the coordinator of ``args``."""
    return run_reporting_errors(command, body, (COORDINATOR, args.coordinator))


def _partitions(entries: list[dict[str, Any]]) -> str:
    return " ".join(f"{e['topic']}[{','.join(map(str, e['partitions']))}]" for e in entries) or "-"


def run_list(args: argparse.Namespace) -> int:
    def body() -> int:
        with CoordinatorClient(args.coordinator) as client:
            groups = client.list_groups()
        print(f"{'GROUP':<32} {'STATE':<12} {'EPOCH':>6} {'MEMBERS':>8}")
        for g in groups:
            print(f"{g['group_id']:<32} {g['state']:<12} {g['epoch']:>6} {g['members']:>8}")
        return 0

    return report("groups list", body, args)


def run_describe(args: argparse.Namespace) -> int:
    def body() -> int:
        with CoordinatorClient(args.coordinator) as client:
            g = client.describe(args.group)
        print(f"Group {g['group_id']}: {g['state']}, epoch {g['epoch']}, assignor {g['assignor']}")
        print(f"Topics: {', '.join(f'{t} ({n})' for t, n in sorted(g['topics'].items())) or '-'}")
        print(f"{'MEMBER':<34} {'INSTANCE':<14} {'EPOCH':>6}  ASSIGNMENT (REVOKING)")
        for m in g["members"]:
            revoking = f" ({_partitions(m['revoking'])})" if m["revoking"] else ""
            print(
                f"{m['member_id']:<34} {m['instance_id'] or '-':<14} {m['member_epoch']:>6}  "
                f"{_partitions(m['assignment'])}{revoking}"
            )
        return 0

    return report("groups describe", body, args)


def run_lag(args: argparse.Namespace) -> int:
    def body() -> int:
        with CoordinatorClient(args.coordinator) as client:
            lag = client.lag(args.group)
        print(f"{'TOPIC':<32} {'PARTITION':>9} {'COMMITTED':>10} {'END':>10} {'LAG':>8}  MEMBER")
        for p in lag["partitions"]:
            committed = "-" if p["committed_offset"] is None else p["committed_offset"]
            print(
                f"{p['topic']:<32} {p['partition']:>9} {committed:>10} {p['end_offset']:>10} "
                f"{p['lag']:>8}  {p['member_id'] or '-'}"
            )
        print(f"Total lag: {lag['total_lag']}")
        return 0

    return report("groups lag", body, args)


def run_reset(args: argparse.Namespace) -> int:
    def body() -> int:
        request: dict[str, Any] = {"strategy": args.to, "topics": args.topic or []}
        if args.to == "timestamp":
            request["timestamp"] = args.timestamp
        if args.to == "explicit":
            offsets = []
            for item in args.offset or []:
                try:
                    topic, partition, offset = item.rsplit(":", 2)
                    offsets.append(
                        {"topic": topic, "partition": int(partition), "offset": int(offset)}
                    )
                except ValueError:
                    raise ValueError(
                        f"--offset expects TOPIC:PARTITION:OFFSET, got {item!r}"
                    ) from None
            request["offsets"] = offsets
        with CoordinatorClient(args.coordinator) as client:
            result = client.reset(args.group, request)
        for o in result["offsets"]:
            print(f"{o['topic']}\t{o['partition']}\t{o['offset']}")
        return 0

    return report("groups reset", body, args)


def run_delete(args: argparse.Namespace) -> int:
    def body() -> int:
        with CoordinatorClient(args.coordinator) as client:
            client.delete(args.group)
        print(f"Deleted group {args.group}.")
        return 0

    return report("groups delete", body, args)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("groups", help="list, inspect, reset and delete consumer groups")
    commands = parser.add_subparsers(
        dest="groups_command", metavar="COMMAND", required=True, help="what to do"
    )

    p = commands.add_parser("list", help="every group with its state and member count")
    add_coordinator_argument(p)
    p.set_defaults(func=run_list)

    for name, func, text in (
        ("describe", run_describe, "state, epoch, members and their partitions"),
        ("lag", run_lag, "committed offsets against the brokers' end offsets"),
        ("delete", run_delete, "delete a group without members and its offsets"),
    ):
        p = commands.add_parser(name, help=text)
        p.add_argument("group", help="group id")
        add_coordinator_argument(p)
        p.set_defaults(func=func)

    p = commands.add_parser("reset", help="reset committed offsets (the group must be empty)")
    p.add_argument("group", help="group id")
    p.add_argument(
        "--to",
        required=True,
        choices=("earliest", "latest", "timestamp", "explicit"),
        help="log start, log end, the first offset at --timestamp, or each --offset",
    )
    p.add_argument("--topic", action="append", help="topic to reset (repeatable)")
    p.add_argument("--timestamp", type=int, help="epoch milliseconds, with --to timestamp")
    p.add_argument(
        "--offset", action="append", help="TOPIC:PARTITION:OFFSET, with --to explicit (repeatable)"
    )
    add_coordinator_argument(p)
    p.set_defaults(func=run_reset)
