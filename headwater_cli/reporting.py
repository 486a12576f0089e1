"""Expected failures as one clear line on stderr and exit status 1, never a traceback.

A command names the services it talks to; when an answer makes no sense (a code the service's
family does not know, a body that is not its JSON), the URL is checked for what answers there,
so a broker URL that points at the registry says so instead of ``HTTP 404 ... (error 50000)``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import httpx

from headwater.errors import HeadwaterError, UnknownServerError
from headwater_cli.endpoints import Service, misdirected

Target = tuple[Service, str]
"""A service a command talks to, and the URL(s) it was given for it."""

# What a success body that is not the service's JSON raises while being read (orjson's and
# httpx's decode errors are json.JSONDecodeError, a ValueError: caught before plain ValueError).
_UNEXPECTED_ANSWERS = (json.JSONDecodeError, KeyError, TypeError)


def run_reporting_errors(command: str, body: Callable[[], int], *targets: Target) -> int:
    """Run ``body``; typed errors, unreachable or misdirected services become one line, exit 1."""
    try:
        return body()
    except UnknownServerError as exc:
        fail(command, _misdirection(targets) or f"{exc.message} (error {exc.error_code})")
    except HeadwaterError as exc:
        fail(command, f"{exc.message} (error {exc.error_code})")
    except httpx.TransportError as exc:
        target = exc.request.url if exc.request else "the service"
        fail(command, f"cannot reach {target}: {exc}")
    except _UNEXPECTED_ANSWERS:
        reason = _misdirection(targets)
        if reason is None:
            raise  # the service is the right one: this is a bug, and its traceback helps
        fail(command, reason)
    except ValueError as exc:  # a flag or config value the command or the SDK refused
        fail(command, str(exc))
    return 1


def fail(command: str, message: str) -> None:
    print(f"headwater {command}: {message}", file=sys.stderr)


def _misdirection(targets: tuple[Target, ...]) -> str | None:
    for service, urls in targets:
        reason = misdirected(service, urls)
        if reason is not None:
            return reason
    return None
