"""Passwords: argon2id hashes, a check that takes as long for an unknown user, and a cache.

Stored credentials are argon2id hashes (argon2-cffi, RFC 9106's parameters carried in the hash
string, so stronger parameters later verify old hashes unchanged). :class:`PasswordChecker`
answers "is this the user's password":

- an unknown user is checked against a hash of a random password made once with the same
  parameters, so the answer takes the KDF's time either way: timing does not tell which user
  names exist (Karapace answers an unknown user faster than a wrong password);
- a verified credential is remembered for a short time (``ttl_s``) in a bounded map keyed by a
  SHA-256 of user, password and stored hash, never the password itself. A request carrying the same
  Basic credentials then costs a hash and a lookup instead of the KDF (~tens of ms by design). A
  changed password changes the stored hash, so the old entry no longer matches; a removed user is
  refused at once (the stored hash is looked up first). Failures are never cached.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable

import argon2
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from headwater_kernel.clock import SYSTEM_CLOCK, Clock

# argon2id at OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): tens of milliseconds on
# one core. argon2-cffi's default (RFC 9106's 64 MiB, 3 passes, 4 lanes) takes ~10x that on a
# two-core broker, which would make every failed login a cheap way to burn its CPU. Stored
# hashes carry their own parameters, so raising these later still verifies old hashes.
DEFAULT_HASHER = argon2.PasswordHasher(
    time_cost=2, memory_cost=19_456, parallelism=1, type=argon2.Type.ID
)

StoredHash = Callable[[str], str | None]
"""The stored argon2 hash of a user name, or None for a user that does not exist."""


def hash_password(password: str, hasher: argon2.PasswordHasher = DEFAULT_HASHER) -> str:
    """The argon2id hash string to store for ``password`` (salted, parameters included)."""
    if not password:
        raise ValueError("a password must not be empty")
    return hasher.hash(password)


class PasswordChecker:
    """Checks user name and password pairs against stored hashes (see the module docstring)."""

    def __init__(
        self,
        stored_hash: StoredHash,
        *,
        hasher: argon2.PasswordHasher = DEFAULT_HASHER,
        ttl_s: float = 60.0,
        max_entries: int = 10_000,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._stored_hash = stored_hash
        self._hasher = hasher
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        # Checked against for unknown users: the same parameters, a password nobody knows.
        self._decoy = hasher.hash(secrets.token_urlsafe(32))
        self._verified: OrderedDict[bytes, float] = OrderedDict()  # key -> expiry (monotonic)
        self._lock = threading.Lock()

    def check(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s. Runs the KDF unless the pair was verified within
        ``ttl_s``; an unknown user costs the same KDF as a wrong password."""
        stored = self._stored_hash(user)
        key = _cache_key(user, password, stored or "")
        if stored is not None and self._remembered(key):
            return True
        ok = self._verify(stored if stored is not None else self._decoy, password)
        if not ok or stored is None:
            return False
        self._remember(key)
        return True

    def forget(self) -> None:
        """Drop every remembered credential (users or passwords changed in bulk)."""
        with self._lock:
            self._verified.clear()

    def _verify(self, stored: str, password: str) -> bool:
        try:
            return self._hasher.verify(stored, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def _remembered(self, key: bytes) -> bool:
        now = self._clock.monotonic()
        with self._lock:
            expiry = self._verified.get(key)
            if expiry is None:
                return False
            if expiry <= now:
                del self._verified[key]
                return False
            self._verified.move_to_end(key)
            return True

    def _remember(self, key: bytes) -> None:
        with self._lock:
            self._verified[key] = self._clock.monotonic() + self._ttl_s
            self._verified.move_to_end(key)
            while len(self._verified) > self._max_entries:
                self._verified.popitem(last=False)


def _cache_key(user: str, password: str, stored: str) -> bytes:
    # Lengths first, so no two (user, password, hash) triples join to the same bytes.
    parts = [user.encode(), password.encode(), stored.encode()]
    framed = b"".join(len(p).to_bytes(4, "big") + p for p in parts)
    return hashlib.sha256(framed).digest()
