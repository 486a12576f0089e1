"""argon2id credentials: right and wrong passwords, the unknown user's equal time, the cache."""

from __future__ import annotations

import time
from typing import Literal

import argon2
import pytest

from headwater_kernel.clock import ManualClock
from headwater_kernel.security.passwords import DEFAULT_HASHER, PasswordChecker, hash_password

# Cheap parameters for the behaviour tests; the timing test uses the real defaults.
FAST = argon2.PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=argon2.Type.ID)


class CountingHasher(argon2.PasswordHasher):
    """argon2's hasher, counting the KDF runs of verify."""

    runs = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        self.runs += 1
        return super().verify(hash, password)


class Users:
    """A credential store: user -> stored hash, counting lookups."""

    def __init__(self, hasher: argon2.PasswordHasher = FAST) -> None:
        self.hasher = hasher
        self.hashes: dict[str, str] = {}

    def add(self, user: str, password: str) -> None:
        self.hashes[user] = hash_password(password, self.hasher)

    def __call__(self, user: str) -> str | None:
        return self.hashes.get(user)


def test_stored_hashes_are_argon2id_and_salted() -> None:
    first, second = hash_password("s3cret", FAST), hash_password("s3cret", FAST)
    assert first.startswith("$argon2id$")
    assert first != second
    assert DEFAULT_HASHER.type is argon2.Type.ID
    with pytest.raises(ValueError, match="empty"):
        hash_password("", FAST)


def test_right_wrong_and_unknown() -> None:
    users = Users()
    users.add("alice", "s3cret")
    checker = PasswordChecker(users, hasher=FAST)
    assert checker.check("alice", "s3cret")
    assert not checker.check("alice", "S3cret")
    assert not checker.check("mallory", "s3cret")
    assert not checker.check("alice", "")


def test_a_verified_pair_skips_the_kdf_until_it_expires() -> None:
    users, clock = Users(), ManualClock()
    users.add("alice", "s3cret")
    hasher = CountingHasher(time_cost=1, memory_cost=8, parallelism=1, type=argon2.Type.ID)
    checker = PasswordChecker(users, hasher=hasher, ttl_s=60, clock=clock)
    hasher.runs = 0
    assert (checker.check("alice", "s3cret"), hasher.runs) == (True, 1)
    assert (checker.check("alice", "s3cret"), hasher.runs) == (True, 1)  # remembered
    assert (checker.check("alice", "wrong"), hasher.runs) == (False, 2)  # failures always pay
    assert (checker.check("alice", "wrong"), hasher.runs) == (False, 3)  # never remembered
    clock.advance(61)
    assert (checker.check("alice", "s3cret"), hasher.runs) == (True, 4)  # expired: the KDF again


def test_a_changed_or_removed_password_is_refused_at_once() -> None:
    users = Users()
    users.add("alice", "old")
    checker = PasswordChecker(users, hasher=FAST)
    assert checker.check("alice", "old")
    users.add("alice", "new")
    assert not checker.check("alice", "old")  # the remembered pair named the old hash
    assert checker.check("alice", "new")
    del users.hashes["alice"]
    assert not checker.check("alice", "new")


def test_the_cache_is_bounded() -> None:
    users = Users()
    for i in range(5):
        users.add(f"u{i}", "pw")
    checker = PasswordChecker(users, hasher=FAST, max_entries=3)
    for i in range(5):
        assert checker.check(f"u{i}", "pw")
    assert len(checker._verified) == 3


def test_an_unknown_user_takes_as_long_as_a_wrong_password() -> None:
    """With the real parameters, the two measured in turns (so a busy machine slows both alike):
    the quickest of 25 checks each (what the work costs, with the least of other processes'
    noise in it) are within 25% of each other. The KDF dominates; an unknown user answered
    without it would be about a thousand times faster."""
    users = Users(DEFAULT_HASHER)
    users.add("alice", "s3cret")
    checker = PasswordChecker(users)
    times: dict[str, list[float]] = {"alice": [], "nobody": []}
    for round_ in range(25):
        order = ["alice", "nobody"] if round_ % 2 else ["nobody", "alice"]  # neither always first
        for user in order:
            start = time.perf_counter()
            assert not checker.check(user, "not-the-password")
            times[user].append(time.perf_counter() - start)
    wrong, unknown = min(times["alice"]), min(times["nobody"])
    assert wrong > 0.005  # the real KDF ran
    assert abs(unknown - wrong) / wrong < 0.25, (unknown, wrong)
