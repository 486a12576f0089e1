"""``headwater cluster describe``: the cluster id, its controller and every broker's state."""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from headwater.config import AdminConfig
from headwater.errors import BROKER
from headwater_cli.topics import add_bootstrap_argument, broker_config, report


def describe(
    bootstrap: str | Sequence[str],
    timeout_s: float = 10.0,
    verify: ssl.SSLContext | bool = True,
) -> dict[str, Any]:
    """``GET /cluster`` from the first bootstrap server that answers (any broker can)."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else bootstrap
    urls = [u.strip().rstrip("/") for u in items if u.strip()]
    last: httpx.TransportError | None = None
    for url in urls:
        try:
            answer = httpx.get(f"{url}/cluster", timeout=timeout_s, verify=verify)
        except httpx.TransportError as exc:
            last = exc
            continue
        body = orjson.loads(answer.content)
        if answer.status_code >= 400:
            raise BROKER.from_body(answer.status_code, body)
        described: dict[str, Any] = body
        return described
    if last is None:
        raise ValueError("no bootstrap server given")
    raise last


def run_describe(args: argparse.Namespace) -> int:
    def body() -> int:
        config = AdminConfig.from_dict(broker_config(args))
        cluster = describe(
            config.bootstrap_servers, args.request_timeout_ms / 1000, config.ssl_context()
        )
        controller = cluster["controller"]
        who = "none" if controller["broker_id"] < 0 else f"broker {controller['broker_id']}"
        print(f"Cluster: {cluster['cluster_id']}")
        print(f"Controller: {who} (epoch {controller['epoch']})")
        rows: list[tuple[Any, ...]] = [("BROKER", "STATE", "RACK", "URL")]
        for b in cluster["brokers"]:
            rows.append((b["broker_id"], b["state"], b["rack"] or "-", b["url"]))
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        return 0

    return report("cluster describe", body, args)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("cluster", help="the broker cluster")
    commands = parser.add_subparsers(
        dest="cluster_command", metavar="COMMAND", required=True, help="what to do"
    )
    described = commands.add_parser(
        "describe", help="cluster id, controller and brokers (any broker answers)"
    )
    add_bootstrap_argument(described)
    described.set_defaults(func=run_describe)
