"""Principals: who a request acts as, written Kafka's way (``User:alice``)."""

from __future__ import annotations

from dataclasses import dataclass

USER = "User"
ANYONE = "*"


class InvalidPrincipalError(ValueError):
    """A principal string that is not ``<type>:<name>``."""


@dataclass(frozen=True, slots=True)
class Principal:
    """A principal type (``User``) and name. ``User:*`` in an ACL stands for every user."""

    kind: str
    name: str

    @classmethod
    def user(cls, name: str) -> Principal:
        return cls(USER, name)

    @classmethod
    def parse(cls, text: str) -> Principal:
        """``User:alice`` -> Principal("User", "alice"); the name may itself hold colons."""
        kind, colon, name = text.partition(":")
        if not colon or not kind or not name:
            raise InvalidPrincipalError(f"principal {text!r} is not of the form User:<name>")
        if kind != USER:
            raise InvalidPrincipalError(f"principal type {kind!r} is not supported (only User)")
        return cls(kind, name)

    def matches(self, other: Principal) -> bool:
        """Whether this principal, as written in an ACL, covers ``other``: itself, or every
        authenticated user for ``User:*`` (the anonymous principal is no user)."""
        if self == other:
            return True
        return self.name == ANYONE and self.kind == other.kind and other != ANONYMOUS

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


ANONYMOUS = Principal(USER, "ANONYMOUS")
"""Who a request without credentials acts as, where anonymous access is allowed (Kafka's name)."""
