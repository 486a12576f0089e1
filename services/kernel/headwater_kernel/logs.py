"""Structured JSON log lines, one object per line, carrying the id of the request being served.

Every service logs through the standard :mod:`logging` module; :func:`configure` installs
:class:`JSONFormatter` on the root logger, so uvicorn's own loggers and every ``logging.getLogger``
in domain code come out the same way. A line looks like::

    {"ts": "2026-11-25T21:40:00.123Z", "level": "INFO", "logger": "headwater.access",
     "message": "request", "request_id": "4f1c...", "method": "POST", "status": 200, ...}

``request_id`` is read from :data:`request_id` (a context variable the request middleware in
:mod:`headwater_kernel.telemetry` sets for the duration of each request), so a log call deep in
domain code is tied to the request that caused it without passing anything down. Extra fields
given with ``log.info(..., extra={"topic": t})`` become top-level keys.

On a terminal (``make up`` in the foreground) lines are short and readable instead:
``21:40:00 INFO  broker  headwater.broker: created topic orders [4f1c...]``.
``HEADWATER_LOG_FORMAT=json`` or ``console`` overrides the choice.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from contextvars import ContextVar
from typing import IO, Any

import orjson

request_id: ContextVar[str | None] = ContextVar("headwater_request_id", default=None)
"""The ``X-Request-ID`` of the request this task is serving, or None outside a request."""

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is emitted.
# uvicorn adds ``color_message`` (the message with ANSI colour codes) for its terminal formatter.
_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys()
    | {"message", "asctime", "taskName", "color_message"}
)


class JSONFormatter(logging.Formatter):
    """Formats a record as one JSON object: ts, level, logger, message, request_id, extras, exc."""

    def __init__(self, static: dict[str, Any] | None = None) -> None:
        super().__init__()
        # Fields stamped on every line (e.g. the service name), so aggregated logs stay sortable.
        self.static = dict(static or {})

    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        millis = int((record.created - seconds) * 1000)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        line: dict[str, Any] = {
            "ts": f"{stamp}.{millis:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **self.static,
        }
        rid = request_id.get()
        if rid is not None:
            line["request_id"] = rid
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


class ConsoleFormatter(logging.Formatter):
    """One short line per record for a person at a terminal: time, level, service, logger."""

    def __init__(self, static: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.service = str((static or {}).get("service", ""))

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname:<5} {self.service}  {record.name}: {record.getMessage()}"
        rid = request_id.get()
        if rid is not None:
            line += f" [{rid}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "info", *, stream: IO[str] | None = None, **static: Any) -> None:
    """Send every logger's records to ``stream`` (stderr) at ``level`` and above: JSON lines,
    or readable lines when ``stream`` is a terminal (``HEADWATER_LOG_FORMAT`` overrides).

    Replaces the root logger's handlers, so calling it twice does not duplicate lines.
    """
    out = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(out)
    choice = os.environ.get("HEADWATER_LOG_FORMAT", "auto").lower()
    console = choice == "console" or (choice == "auto" and out.isatty())
    handler.setFormatter(ConsoleFormatter(static) if console else JSONFormatter(static))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # One line per outgoing HTTP call (coordinator -> brokers) drowns the service's own lines.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
