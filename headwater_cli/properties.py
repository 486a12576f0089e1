"""Kafka client properties files (``--command-config``), as Kafka's tools take them.

The common subset of Java's ``.properties`` format: one ``key=value`` (or ``key: value``,
``key value``) per line, ``#`` and ``!`` comments, blank lines, whitespace around keys and values
trimmed. A line ending in a backslash (a continued value) is refused rather than misread; no
client setting needs one.
"""

from __future__ import annotations

import re
from pathlib import Path

_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")


class PropertiesError(ValueError):
    """A properties file that cannot be read as written; the message names the line."""


def read_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PropertiesError(f"cannot read {path}: {exc.strerror or exc}") from None
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            raise PropertiesError(f"{path}:{number}: continued lines are not supported")
        parts = _SEPARATOR.split(line, maxsplit=1)
        key = parts[0]
        properties[key] = parts[1].strip() if len(parts) > 1 else ""
    return properties
