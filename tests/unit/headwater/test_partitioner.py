"""Kafka's murmur2 partitioner (bit-identical to the Java client) and the sticky partitioner."""

from __future__ import annotations

import random

import pytest

from headwater.records import StickyPartitioner, murmur2, partition_for_key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_for_key_masks_the_sign_bit() -> None:
    # -973932308 & 0x7fffffff = 1173551340
    assert partition_for_key(b"21", 7) == 1173551340 % 7 == 3
    assert partition_for_key(b"abc", 10) == 479470107 % 10 == 7
    assert partition_for_key(b"foobar", 1) == 0


def test_murmur2_of_empty_and_short_tails() -> None:
    values = {murmur2(b""), murmur2(b"a"), murmur2(b"ab"), murmur2(b"abc"), murmur2(b"abcd")}
    assert len(values) == 5
    assert all(-(2**31) <= v < 2**31 for v in values)


def test_sticky_partitioner_sticks_until_batch_size_then_moves() -> None:
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(7))
    first = sticky.partition("t", 4, 400)
    assert sticky.partition("t", 4, 400) == first
    assert sticky.partition("t", 4, 400) == first  # 800 < 1000 before this one
    moved = sticky.partition("t", 4, 400)  # 1200 >= 1000: switch
    assert moved != first
    assert sticky.partition("t", 4, 100) == moved


def test_sticky_partitioner_switches_on_batch_complete_and_per_topic() -> None:
    sticky = StickyPartitioner(batch_size=10**9, rng=random.Random(1))
    a = sticky.partition("a", 3)
    sticky.on_batch_complete("a", 3)
    assert sticky.partition("a", 3) != a
    assert sticky.partition("single", 1) == 0
    sticky.on_batch_complete("single", 1)
    assert sticky.partition("single", 1) == 0


def test_sticky_partitioner_spreads_over_every_partition() -> None:
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(3))
    seen = {sticky.partition("t", 5, 100) for _ in range(200)}
    assert seen == {0, 1, 2, 3, 4}


def test_sticky_partitioner_follows_a_shrunk_partition_count() -> None:
    sticky = StickyPartitioner(batch_size=10**9, rng=random.Random(5))
    for _ in range(20):
        sticky.on_batch_complete("t", 8)
        if sticky.partition("t", 8) >= 2:
            break
    assert sticky.partition("t", 2) in (0, 1)
