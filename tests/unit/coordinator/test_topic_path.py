"""Broker URLs the coordinator builds: every segment escaped, so a name stays one segment."""

from __future__ import annotations

import httpx
import pytest

from headwater_coordinator import names
from headwater_coordinator.metadata import topic_path


@pytest.mark.parametrize(
    ("topic", "path"),
    [
        ("orders", "/topics/orders"),
        ("orders.v2_x-y", "/topics/orders.v2_x-y"),
        ("../healthz", "/topics/..%2Fhealthz"),
        ("T?x=1", "/topics/T%3Fx%3D1"),
        ("x/../T", "/topics/x%2F..%2FT"),
        ("T#frag", "/topics/T%23frag"),
        ("a\u0001b", "/topics/a%01b"),
        ("..", "/topics/%2E%2E"),
        (".", "/topics/%2E"),
        ("a b", "/topics/a%20b"),
    ],
)
def test_topic_segment_is_escaped(topic: str, path: str) -> None:
    assert topic_path(topic) == path
    # httpx sends it as built: nothing decoded, normalised or cut at "?" / "#".
    assert httpx.URL("http://broker:8082" + path).raw_path == path.encode()


def test_every_segment_is_escaped() -> None:
    assert topic_path("T?x", "partitions", 3, "offsets", "lookup") == (
        "/topics/T%3Fx/partitions/3/offsets/lookup"
    )


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("a", True),
        ("A-Z_a.z-0.9", True),
        ("x" * 249, True),
        ("...", True),
        ("x" * 250, False),
        ("", False),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("a\n", False),
        ("ü", False),
    ],
)
def test_kafka_name_rule(name: str, valid: bool) -> None:
    assert names.is_valid(name) is valid
