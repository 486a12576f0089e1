"""The ``headwater`` command line: one sub-command module per domain, registered in COMMANDS."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from headwater import __version__
from headwater_cli.endpoints import SERVICES
from headwater_cli.topics import REQUEST_TIMEOUT

# Each module defines ``register(subparsers)`` adding its sub-commands; each sub-command's parser
# sets ``func`` (taking the parsed namespace, returning an exit code).
COMMANDS = (
    "headwater_cli.up",
    "headwater_cli.schemas",
    "headwater_cli.validate",
    "headwater_cli.topics",
    "headwater_cli.cluster",
    "headwater_cli.partitions",
    "headwater_cli.produce",
    "headwater_cli.consume",
    "headwater_cli.groups",
)


def build_parser() -> argparse.ArgumentParser:
    variables = "\n".join(
        f"  {s.variable:<29} {s.name} URL{'(s)' if s.several else ''} (default {s.default_url})"
        for s in SERVICES
    )
    variables += f"\n  {REQUEST_TIMEOUT:<29} one request to the brokers, in ms (default 30000)"
    parser = argparse.ArgumentParser(
        prog="headwater",
        description="Headwater: a Kafka-style streaming platform over HTTP.",
        epilog=f"environment (docs/settings.md):\n{variables}\n"
        "`headwater up --port-offset N` prints the values that reach it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"headwater {__version__}")
    subparsers = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        help="what to do (headwater COMMAND --help for its options)",
    )
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # inside the try: a reader that left fails the flush, not exit
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`headwater topics list | head -1`): stop quietly, as
        # Unix tools do, with the status a shell gives a command killed by SIGPIPE. Python
        # flushes stdout again at exit, so point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    return code


if __name__ == "__main__":
    sys.exit(main())
