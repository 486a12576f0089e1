"""The ``headwater`` command line: one sub-command module per domain, registered in COMMANDS."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines ``register(subparsers)`` adding its sub-commands; each sub-command's parser
# sets ``func`` (taking the parsed namespace, returning an exit code).
COMMANDS = (
    "headwater_cli.up",
    "headwater_cli.schemas",
    "headwater_cli.validate",
    "headwater_cli.topics",
    "headwater_cli.produce",
    "headwater_cli.consume",
    "headwater_cli.groups",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="headwater",
        description="Headwater: a Kafka-style streaming platform over HTTP.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
