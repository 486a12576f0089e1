"""Follower fetchers over real HTTP on loopback: a leader's partitions served by
``answer_fetch`` behind a real server socket, copied by a ReplicaFetcher into another log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from headwater.errors import HeadwaterError, NotLeaderOrFollowerError, ServiceUnavailableError
from headwater.records.batch import iter_batches
from headwater.types import PartitionId
from headwater_broker.log.partition import PartitionLog
from headwater_broker.replication.fetcher import FETCH_PATH, ReplicaFetcher
from headwater_broker.replication.follower import ApplyOutcome, FollowerPartition
from headwater_broker.replication.leader import PartitionLeader, answer_fetch
from headwater_broker.replication.wire import MEDIA_TYPE, ReplicaFetchRequest
from headwater_broker.topic_config import TopicConfig
from tests.integration.broker.in_process import http_server
from tests.support.waiting import wait_until_async
from tests.unit.broker.replication_sim import NOW, log_bytes, log_values, values_batch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def open_log(path: Path, partition: int = 0) -> PartitionLog:
    return PartitionLog.open(
        path, "t", PartitionId(partition), TopicConfig(), "never", replicated=True
    )


@asynccontextmanager
async def leader_server(leaders: dict[tuple[str, int], PartitionLeader]) -> AsyncIterator[str]:
    """A real HTTP server on a loopback port answering the replica-fetch route."""

    async def fetch(request: Request) -> Response:
        def hint(topic: str, partition: int) -> NotLeaderOrFollowerError:
            return NotLeaderOrFollowerError(f"not leading {topic}-{partition}")

        try:
            chunks = await answer_fetch(
                await request.body(),
                lambda t, p: leaders.get((t, p)),
                hint,
                lambda: NOW,
            )
        except HeadwaterError as exc:
            return Response(str(exc.to_body()), status_code=exc.http_status)

        async def stream() -> AsyncIterator[bytes | memoryview]:
            for chunk in chunks:
                yield chunk

        return StreamingResponse(stream(), media_type=MEDIA_TYPE)

    app = Starlette(routes=[Route(FETCH_PATH, fetch, methods=["POST"])])
    async with http_server(app) as url:
        yield url


async def test_a_fetcher_copies_every_partition_and_drives_acks_all(tmp_path: Path) -> None:
    leaders = {}
    followers = []
    for p in (0, 1):
        leader_log = open_log(tmp_path / f"leader-{p}", p)
        leaders[("t", p)] = PartitionLeader(
            leader_log,
            broker_id=1,
            broker_epoch=1,
            leader_epoch=4,
            partition_epoch=9,
            replicas=[1, 2],
            isr=[1, 2],
            now_ms=NOW,
            min_insync_replicas=2,
        )
        followers.append(
            FollowerPartition(open_log(tmp_path / f"follower-{p}", p), leader_id=1, leader_epoch=4)
        )
    async with leader_server(leaders) as url:
        fetcher = ReplicaFetcher(
            broker_id=2,
            broker_epoch=lambda: 3,
            leader_id=1,
            leader_url=url,
            now_ms=lambda: NOW,
            # Longer than the test waits for an answer: each acks=all append below is answered
            # only if its append answers the parked fetch and the follower's next fetch, sent
            # as soon as it applied the batch, moves the high watermark -- not the long poll's
            # timer.
            max_wait_ms=30_000,
        )
        fetcher.add(followers[0])
        fetcher.start()
        try:
            # acks=all on partition 0 is answered once the fetcher has copied and reported it.
            lead = leaders[("t", 0)]
            for i in range(5):
                body = bytearray(values_batch([f"a{i}", f"b{i}"]))
                results = await asyncio.wait_for(
                    lead.append(body, list(iter_batches(body)), NOW, acks=-1, timeout_s=10), 15
                )
                assert results[0].base_offset == 2 * i
            assert lead.plog.high_watermark == 10
            # A partition added while a long poll is out is fetched without waiting for it.
            other = leaders[("t", 1)]
            body = bytearray(values_batch(["x"]))
            await other.append(body, list(iter_batches(body)), NOW, acks=1, timeout_s=1)
            fetcher.add(followers[1])
            await wait_until_async(lambda: other.plog.high_watermark == 1)
            assert other.plog.high_watermark == 1
            await wait_until_async(lambda: followers[0].plog.high_watermark == 10)
        finally:
            await fetcher.stop()
    for p, follower in enumerate(followers):
        leader_log = leaders[("t", p)].plog
        assert log_bytes(follower.plog) == log_bytes(leader_log)
    assert log_values(followers[0].plog)[:2] == ["a0", "b0"]
    assert followers[0].plog.high_watermark == 10


async def test_a_fenced_follower_and_an_unreachable_leader_are_retried(
    tmp_path: Path,
) -> None:
    leader_log = open_log(tmp_path / "leader")
    lead = PartitionLeader(
        leader_log,
        broker_id=1,
        broker_epoch=1,
        leader_epoch=6,
        partition_epoch=1,
        replicas=[1, 2],
        isr=[1],
        now_ms=NOW,
    )
    body = bytearray(values_batch(["a"]))
    await lead.append(body, list(iter_batches(body)), NOW, acks=1, timeout_s=1)
    stale = FollowerPartition(open_log(tmp_path / "follower"), leader_id=1, leader_epoch=5)
    outcomes: list[ApplyOutcome] = []
    async with leader_server({("t", 0): lead}) as url:
        fetcher = ReplicaFetcher(
            broker_id=2,
            broker_epoch=lambda: 1,
            leader_id=1,
            leader_url=url,
            now_ms=lambda: NOW,
            backoff_s=0.05,
            on_outcome=lambda _f, o: outcomes.append(o),
        )
        fetcher.add(stale)
        fetcher.start()
        try:
            await wait_until_async(lambda: len(outcomes) >= 2)
            assert {o.error_code for o in outcomes} == {40904}  # asked again, refused again
            assert all(o.needs_metadata for o in outcomes)
            assert stale.plog.log_end_offset == 0
            fetcher.add(FollowerPartition(stale.plog, leader_id=1, leader_epoch=6))
            await wait_until_async(lambda: stale.plog.log_end_offset == 1)
            assert stale.plog.log_end_offset == 1
        finally:
            await fetcher.stop()
    # Nothing listens there any more: the fetcher keeps retrying without failing.
    fetcher = ReplicaFetcher(
        broker_id=2,
        broker_epoch=lambda: 1,
        leader_id=1,
        leader_url=url,
        now_ms=lambda: NOW,
        backoff_s=0.01,
    )
    fetcher.add(FollowerPartition(stale.plog, leader_id=1, leader_epoch=6))
    fetcher.start()
    await asyncio.sleep(0.1)
    (loop,) = fetcher._tasks  # still running, nothing died
    assert not loop.done()
    assert fetcher.failed_tasks == {}
    await fetcher.stop()


async def test_a_leader_error_reaches_the_follower_with_its_type() -> None:
    """A leader that answers an error status (here 503 50301: it has not joined its cluster
    yet) is reported to the follower as that typed, retriable error, not a bare 50001."""

    async def refuse(request: Request) -> Response:
        body = b'{"error_code": 50301, "message": "This broker has not joined its cluster yet"}'
        return Response(body, status_code=503, media_type="application/json")

    app = Starlette(routes=[Route(FETCH_PATH, refuse, methods=["POST"])])
    async with http_server(app) as url:
        fetcher = ReplicaFetcher(
            broker_id=2, broker_epoch=lambda: 3, leader_id=1, leader_url=url, now_ms=lambda: NOW
        )
        request = ReplicaFetchRequest(
            replica_id=2, broker_epoch=3, max_wait_ms=0, min_bytes=1, partitions=[]
        )
        try:
            with pytest.raises(ServiceUnavailableError) as raised:
                await fetcher._send(request)
            assert raised.value.error_code == 50301
            assert "not joined" in raised.value.message
        finally:
            await fetcher.stop()
