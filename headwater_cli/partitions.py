"""``headwater partitions reassign`` and ``headwater partitions reassignment``: move a partition
to new replicas and follow the move (docs/cluster.md, "Reassignment")."""

from __future__ import annotations

import argparse
import time
from typing import Any

from headwater.admin import AdminClient
from headwater.client.broker import PartitionReassignment
from headwater.topic_partition import TopicPartition
from headwater_cli.topics import add_bootstrap_argument, broker_config, report


def parse_replicas(text: str) -> list[int]:
    """``0,1,2`` as broker ids; anything else is a usage error (nothing is sent)."""
    try:
        ids = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--replicas expects broker ids like 0,1,2, got {text!r}") from None
    if not ids:
        raise ValueError("--replicas names no broker")
    return ids


def _ids(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values)) or "-"


def show(state: PartitionReassignment) -> None:
    where = f"{state.topic}-{state.partition}"
    status = "in progress" if state.in_progress else "none in progress"
    print(f"Partition: {where}\tReassignment: {status}")
    print(
        f"  replicas={_ids(state.replicas)} target={_ids(state.target_replicas)} "
        f"adding={_ids(state.adding_replicas)} removing={_ids(state.removing_replicas)}"
    )
    print(f"  isr={_ids(state.isr)} leader={state.leader} partition_epoch={state.partition_epoch}")


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(broker_config(args))


def run_reassign(args: argparse.Namespace) -> int:
    def body() -> int:
        replicas = parse_replicas(args.replicas)
        tp = TopicPartition(args.topic, args.partition)
        with _admin(args) as admin:
            state = admin.alter_partition_reassignments({tp: replicas})[tp]
            show(state)
            if not args.wait:
                return 0
            deadline = time.monotonic() + args.wait_timeout
            while state.in_progress:
                if time.monotonic() > deadline:
                    print(f"Still in progress after {args.wait_timeout:g}s")
                    return 1
                time.sleep(0.5)
                state = admin.list_partition_reassignments([tp])[tp]
        show(state)
        return 0

    return report("partitions reassign", body, args)


def run_reassignment(args: argparse.Namespace) -> int:
    def body() -> int:
        tp = TopicPartition(args.topic, args.partition)
        with _admin(args) as admin:
            show(admin.list_partition_reassignments([tp])[tp])
        return 0

    return report("partitions reassignment", body, args)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("partitions", help="partition replicas and their moves")
    commands = parser.add_subparsers(
        dest="partitions_command", metavar="COMMAND", required=True, help="what to do"
    )
    reassign = commands.add_parser(
        "reassign",
        help="move a partition to new replicas (the replicas of before cancel a move)",
    )
    reassign.add_argument("topic", metavar="TOPIC", help="the topic")
    reassign.add_argument("partition", metavar="PARTITION", type=int, help="the partition")
    reassign.add_argument(
        "--replicas",
        required=True,
        help="the new replica list, broker ids like 0,1,2 (the first is the preferred leader)",
    )
    reassign.add_argument(
        "--wait", action="store_true", help="wait until the move completes, printing its state"
    )
    reassign.add_argument(
        "--wait-timeout", type=float, default=300.0, help="seconds --wait waits (default 300)"
    )
    add_bootstrap_argument(reassign)
    reassign.set_defaults(func=run_reassign)
    progress = commands.add_parser(
        "reassignment", help="a partition's replicas and the move in progress (adding, removing)"
    )
    progress.add_argument("topic", metavar="TOPIC", help="the topic")
    progress.add_argument("partition", metavar="PARTITION", type=int, help="the partition")
    add_bootstrap_argument(progress)
    progress.set_defaults(func=run_reassignment)
