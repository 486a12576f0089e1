"""``headwater partitions reassign`` and ``headwater partitions reassignment``: move a partition
to new replicas and follow the move (docs/cluster.md, "Reassignment")."""

from __future__ import annotations

import argparse
import time
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from headwater.errors import BROKER
from headwater_cli.topics import add_bootstrap_argument, report


def call(
    bootstrap: str, method: str, path: str, body: Any = None, timeout_s: float = 30.0
) -> dict[str, Any]:
    """One request to the first bootstrap server that answers (any broker can: admin is relayed
    to the controller); an error answer raises its typed error."""
    urls = [u.strip().rstrip("/") for u in bootstrap.split(",") if u.strip()]
    last: httpx.TransportError | None = None
    for url in urls:
        try:
            answer = httpx.request(method, f"{url}{path}", json=body, timeout=timeout_s)
        except httpx.TransportError as exc:
            last = exc
            continue
        parsed = orjson.loads(answer.content)
        if answer.status_code >= 400:
            raise BROKER.from_body(answer.status_code, parsed)
        result: dict[str, Any] = parsed
        return result
    if last is None:
        raise ValueError("no bootstrap server given")
    raise last


def _path(topic: str, partition: int) -> str:
    return f"/topics/{quote(topic, safe='')}/partitions/{partition}/reassignment"


def parse_replicas(text: str) -> list[int]:
    """``0,1,2`` as broker ids; anything else is a usage error (nothing is sent)."""
    try:
        ids = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--replicas expects broker ids like 0,1,2, got {text!r}") from None
    if not ids:
        raise ValueError("--replicas names no broker")
    return ids


def _ids(values: list[int]) -> str:
    return ",".join(map(str, values)) or "-"


def show(state: dict[str, Any]) -> None:
    where = f"{state['topic']}-{state['partition']}"
    status = "in progress" if state["in_progress"] else "none in progress"
    print(f"Partition: {where}\tReassignment: {status}")
    print(
        f"  replicas={_ids(state['replicas'])} target={_ids(state['target_replicas'])} "
        f"adding={_ids(state['adding'])} removing={_ids(state['removing'])}"
    )
    print(
        f"  isr={_ids(state['isr'])} leader={state['leader']} "
        f"partition_epoch={state['partition_epoch']}"
    )


def run_reassign(args: argparse.Namespace) -> int:
    def body() -> int:
        replicas = parse_replicas(args.replicas)
        path = _path(args.topic, args.partition)
        state = call(args.bootstrap_server, "POST", path, {"replicas": replicas})
        show(state)
        if not args.wait:
            return 0
        deadline = time.monotonic() + args.wait_timeout
        while state["in_progress"]:
            if time.monotonic() > deadline:
                print(f"Still in progress after {args.wait_timeout:g}s")
                return 1
            time.sleep(0.5)
            state = call(args.bootstrap_server, "GET", path)
        show(state)
        return 0

    return report("partitions reassign", body, args)


def run_reassignment(args: argparse.Namespace) -> int:
    def body() -> int:
        show(call(args.bootstrap_server, "GET", _path(args.topic, args.partition)))
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
