"""Subject names, version numbers and schema ids as requests give them, by Confluent's rules.

Confluent reads versions and ids as Java ``int`` (``Integer.valueOf``): an optional sign and
decimal digits, from -2^31 to 2^31-1. A path segment outside that is no version (42202) and no
schema id (40403), never a number handed to the store, whose columns are 32-bit.
"""

from __future__ import annotations

import re

from headwater.registry.errors import (
    InvalidSubjectError,
    InvalidVersionError,
    SchemaNotFoundError,
)
from headwater.types import SchemaId

LATEST = -1
"""The number :func:`parse_version` gives ``latest`` and ``-1``: the newest version."""
INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
"""The range of Java's ``int``: every version number and schema id lies in it."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Java's Integer.valueOf: a sign, then digits (Character.digit takes any Unicode decimal digit,
# as Python's \d and int() do); no spaces or underscores, which int() alone would allow.
_JAVA_INT = re.compile(r"([+-]?)0*(\d*)")


def java_int(text: str) -> int | None:
    """``text`` as Java's ``Integer.valueOf`` reads it, or None where that throws."""
    match = _JAVA_INT.fullmatch(text)
    # Eleven significant digits already overflow; checking first keeps int() cheap.
    if match is None or text in ("", "+", "-") or len(match[2]) > 10:
        return None
    number = int(match[1] + (match[2] or "0"))
    return number if INT_MIN <= number <= INT_MAX else None


def parse_version(version: str) -> int:
    """A version path segment as a number: ``latest`` and ``-1`` mean -1; others must be >= 1."""
    number = LATEST if version == "latest" else java_int(version)
    if number is not None and (number == LATEST or number >= 1):
        return number
    shown = version if len(version) <= 40 else version[:40] + "..."
    raise InvalidVersionError(
        f"The specified version '{shown}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"'
    )


def parse_schema_id(schema_id: str) -> SchemaId:
    """A schema id path segment as a number; one that is no Java ``int`` names no schema."""
    number = java_int(schema_id)
    if number is None:
        shown = schema_id if len(schema_id) <= 40 else schema_id[:40] + "..."
        raise SchemaNotFoundError(f"Schema {shown} not found")
    return SchemaId(number)


def check_subject(subject: str) -> None:
    """42208 unless ``subject`` is 1..512 characters without control characters."""
    if not subject or _CONTROL.search(subject) or len(subject) > 512:
        raise InvalidSubjectError(f"The subject name {subject!r} is not valid")
