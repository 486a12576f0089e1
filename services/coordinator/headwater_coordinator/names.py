"""Kafka's rule for topic names, which the coordinator also applies to group ids.

1-249 characters of ``[A-Za-z0-9._-]``, and not ``.`` or ``..``: the rule every broker enforces,
so a name outside it can never be a topic. It also keeps every name a plain URL path segment
(nothing that a client, a proxy or the broker's router would escape, collapse or split).
"""

from __future__ import annotations

import re

PATTERN = r"(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}"
MAX_LENGTH = 249
_NAME = re.compile(PATTERN)


def is_valid(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def describe(kind: str, name: str) -> str:
    """The message for a name that breaks the rule."""
    return f"{kind} {name!r} must be 1-249 characters of [A-Za-z0-9._-], and not '.' or '..'"
