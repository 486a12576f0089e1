"""Topic names at the coordinator's edge (in-process app, real Redis, a real broker process):
names outside Kafka's rule are refused with 42206 before anything changes, offsets for topics
that do not exist with 40403, no broker URL is ever built from an unescaped name, and ``/lag``
reports only topics that exist."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from headwater.groups.errors import UnknownTopicOrPartitionError
from headwater.types import PartitionId
from headwater_coordinator.metadata import BrokerMetadata
from tests.integration.coordinator.client import make_topic
from tests.support import ServiceProcess, unique

# The names the issue reported (500s, or offsets stored under another topic's name), and the
# edges of the rule: empty, ".", "..", too long, characters outside [A-Za-z0-9._-].
BAD_NAMES = [
    "../healthz",
    "",
    "a\u0001b",
    ".",
    "..",
    "x" * 250,
    "with space",
    "ünïcode",
]
# Names that hide another topic's name (filled in with a real topic T).
DISGUISED = ["{T}?x=1", "x/../{T}", "{T}#frag", "{T}/partitions"]


@pytest.fixture(scope="module")
def topic(broker: ServiceProcess) -> str:
    return make_topic(broker, 2, records=10)


def names(topic: str) -> list[str]:
    return BAD_NAMES + [d.format(T=topic) for d in DISGUISED]


def error(response: Any) -> tuple[int, int]:
    return response.status_code, response.json()["error_code"]


def test_bad_names_are_refused_everywhere_and_change_nothing(api: TestClient, topic: str) -> None:
    for name in names(topic):
        group = unique("g")
        owned: dict[str, Any] = {"topic": name, "partitions": [0]}
        nothing: dict[str, Any] = {"partitions": []}
        requests = [
            ("/offsets", {"offsets": [{"topic": name, "partition": 0, "offset": 0}]}),
            (
                "/offsets/reset",
                {"strategy": "explicit", "offsets": [{"topic": name, "partition": 0, "offset": 0}]},
            ),
            ("/offsets/reset", {"strategy": "latest", "topics": [name]}),
            ("/offsets/reset", {"strategy": "earliest", "topics": [topic, name]}),
            ("/heartbeat", {"member_epoch": 0, "topics": [topic, name]}),
            ("/heartbeat", {"member_epoch": 0, "topics": [topic], "owned": [owned]}),
            ("/heartbeat", {"member_epoch": 0, "topics": [topic], "owned": [owned | nothing]}),
        ]
        for path, body in requests:
            response = api.post(f"/groups/{group}{path}", json=body)
            assert error(response) == (422, 42206), (name, path, response.text)
            assert repr(name) in response.json()["message"]
        # Nothing was created: no group, no offsets.
        assert error(api.get(f"/groups/{group}")) == (404, 40401)
        assert error(api.get(f"/groups/{group}/offsets")) == (404, 40401)


def test_offsets_for_topics_that_do_not_exist_are_refused(api: TestClient, topic: str) -> None:
    group, ghost = unique("g"), unique("ghost")
    commit = {"offsets": [{"topic": ghost, "partition": 0, "offset": 0}]}
    assert error(api.post(f"/groups/{group}/offsets", json=commit)) == (404, 40403)
    for body in (
        {"strategy": "latest", "topics": [ghost]},
        {"strategy": "timestamp", "topics": [ghost], "timestamp": 0},
        {"strategy": "explicit", "offsets": [{"topic": ghost, "partition": 0, "offset": 0}]},
    ):
        response = api.post(f"/groups/{group}/offsets/reset", json=body)
        assert error(response) == (404, 40403), body
    # A partition the topic does not have is refused the same way.
    commit = {"offsets": [{"topic": topic, "partition": 2, "offset": 0}]}
    assert error(api.post(f"/groups/{group}/offsets", json=commit)) == (404, 40403)
    assert error(api.get(f"/groups/{group}/offsets")) == (404, 40401)


def test_lag_reports_only_topics_that_exist(
    api: TestClient, topic: str, redis_url: str, redis_prefix: str
) -> None:
    group = unique("g")
    commit = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
    assert api.post(f"/groups/{group}/offsets", json=commit).status_code == 204
    # Offsets stored before names were checked, under names no topic has (or one that does not
    # exist): written straight into the group's offsets hash, as the old code stored them.
    client = redis.Redis.from_url(redis_url)
    value = b'{"offset": 1, "metadata": "", "commit_timestamp": 0}'
    phantoms = [d.format(T=topic) for d in DISGUISED] + [unique("ghost")]
    client.hset(f"{redis_prefix}offsets:{group}", mapping={f"{p}:0": value for p in phantoms})
    client.close()
    lag = api.get(f"/groups/{group}/lag").json()
    assert [(p["topic"], p["partition"], p["committed_offset"]) for p in lag["partitions"]] == [
        (topic, 0, 3),
        (topic, 1, None),
    ]
    assert lag["total_lag"] == (5 - 3) + 5


def test_broker_urls_carry_each_name_as_itself(broker: ServiceProcess, topic: str) -> None:
    """The metadata client asks about exactly the name it is given: never another topic (a
    query string, a fragment, a dot segment) and never another route."""

    async def lookups() -> list[Any]:
        metadata = BrokerMetadata([broker.url])
        try:
            found: list[Any] = [await metadata.topic(n, fresh=True) for n in [topic, *names(topic)]]
            try:
                await metadata.offset_for_time(f"{topic}?x=1", PartitionId(0), 0)
            except UnknownTopicOrPartitionError as exc:
                found.append(exc)
            return found
        finally:
            await metadata.close()

    real, *others, lookup = asyncio.run(lookups())
    assert real is not None
    assert (real.name, real.partitions) == (topic, 2)
    assert others == [None] * len(names(topic))
    assert isinstance(lookup, UnknownTopicOrPartitionError)
