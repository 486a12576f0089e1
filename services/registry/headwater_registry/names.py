"""Subject names and version numbers as request paths give them, checked by Confluent's rules."""

from __future__ import annotations

import re

from headwater.registry.errors import InvalidSubjectError, InvalidVersionError

LATEST = -1
"""The number :func:`parse_version` gives ``latest`` and ``-1``: the newest version."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_version(version: str) -> int:
    """A version path segment as a number: ``latest`` and ``-1`` mean -1; others must be >= 1."""
    if version == "latest":
        return LATEST
    try:
        number = int(version)
    except ValueError:
        number = 0
    if number == LATEST or number >= 1:
        return number
    raise InvalidVersionError(
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"'
    )


def check_subject(subject: str) -> None:
    """42208 unless ``subject`` is 1..512 characters without control characters."""
    if not subject or _CONTROL.search(subject) or len(subject) > 512:
        raise InvalidSubjectError(f"The subject name {subject!r} is not valid")
