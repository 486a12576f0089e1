"""Follower fetcher tasks: one per leader broker, long-polling ``POST /replication/fetch``.

A :class:`ReplicaFetcher` holds the :class:`FollowerPartition` of every partition this broker
follows at one leader and runs one loop: build a request from them, send it over its
:class:`~.link.LeaderLink` (the leader holds it up to ``max_wait_ms`` until there is data), apply
each partition's answer, repeat. Adding or
removing a partition interrupts a request in flight, so a new follower starts copying at once.

Failures never stop the loop: a leader that does not answer or answers with an error status is
tried again after a back-off (the metadata moves the partition to another leader meanwhile, and
the metadata applier moves it to that leader's fetcher); a partition whose answer says one side's
view is stale (fenced or unknown epoch, not leader yet) is asked again after a back-off, until
the metadata applier hands it a new :class:`FollowerPartition`; one this broker cannot store
(a storage error, a refused batch) is paused until then. A write that failed on the disk (full
or broken) is also reported through ``on_disk_failure``, with which the broker takes its data
directory offline, as a leader's failed append does.

The leader's side of the route is ``leader.py`` (:func:`~.leader.answer_fetch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from headwater.errors import BROKER, HeadwaterError
from headwater_broker.log.local_log import is_disk_failure
from headwater_broker.replication.follower import ApplyOutcome, FollowerPartition
from headwater_broker.replication.link import LeaderLink, LinkError
from headwater_broker.replication.wire import (
    MEDIA_TYPE,
    MalformedFetchResponseError,
    PartitionResult,
    ReplicaFetchRequest,
    decode_response,
)
from headwater_kernel.tasks import BackgroundTasks

log = logging.getLogger("headwater.broker.replication")

FETCH_PATH = "/replication/fetch"
PartitionKey = tuple[str, int]


@dataclass
class _Followed:
    follower: FollowerPartition
    paused: bool = False
    retry_at: float = 0.0


class ReplicaFetcher:
    """Copies every partition this broker follows at one leader broker."""

    def __init__(
        self,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        leader_id: int,
        leader_url: str,
        now_ms: Callable[[], int],
        max_wait_ms: int = 500,
        partition_max_bytes: int = 1024 * 1024,
        backoff_s: float = 0.2,
        on_outcome: Callable[[FollowerPartition, ApplyOutcome], None] | None = None,
        on_disk_failure: Callable[[str], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.leader_id = leader_id
        self.leader_url = leader_url.rstrip("/")
        self.link = LeaderLink(self.leader_url, ssl_context=ssl_context)
        self.now_ms = now_ms
        self.max_wait_ms = max_wait_ms
        self.partition_max_bytes = partition_max_bytes
        self.backoff_s = backoff_s
        self.on_outcome = on_outcome
        self.on_disk_failure = on_disk_failure
        self.partitions: dict[PartitionKey, _Followed] = {}
        self.rounds = 0  # answers applied (for tests and metrics)
        self._last_answer = 0.0  # loop time of the leader's last answer (or of the first follow)
        self._changed = asyncio.Event()
        self._tasks = BackgroundTasks(log)
        self._started = False

    # --- membership -------------------------------------------------------------------------

    def add(self, follower: FollowerPartition) -> None:
        """Follow a partition here (replacing its previous follower state, if any)."""
        key = (follower.plog.topic, int(follower.plog.partition))
        if not self.partitions:
            self._last_answer = asyncio.get_running_loop().time()  # silence counts from here
        self.partitions[key] = _Followed(follower)
        self._changed.set()

    def silent_s(self) -> float:
        """Seconds since the leader last answered a fetch (0 while nothing is followed)."""
        if not self.partitions:
            return 0.0
        return asyncio.get_running_loop().time() - self._last_answer

    def remove(self, topic: str, partition: int) -> FollowerPartition | None:
        followed = self.partitions.pop((topic, partition), None)
        self._changed.set()
        return None if followed is None else followed.follower

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._tasks.spawn(self._run(), f"replica-fetcher-{self.leader_id}")

    @property
    def failed_tasks(self) -> dict[str, str]:
        return self._tasks.failed

    async def stop(self) -> None:
        await self._tasks.stop()
        await self.link.aclose()

    # --- the loop ---------------------------------------------------------------------------

    async def _request(self) -> tuple[ReplicaFetchRequest, dict[PartitionKey, _Followed]]:
        loop_now = asyncio.get_running_loop().time()
        chosen = {
            key: followed
            for key, followed in self.partitions.items()
            if not followed.paused and followed.retry_at <= loop_now
        }
        entries = []
        for key, followed in list(chosen.items()):
            try:
                entries.append(
                    await followed.follower.durable_fetch_entry(self.partition_max_bytes)
                )
            except HeadwaterError as exc:
                self._stop_copying(followed, key, exc)
                del chosen[key]
        request = ReplicaFetchRequest(
            self.broker_id, self.broker_epoch(), entries, max_wait_ms=self.max_wait_ms
        )
        return request, chosen

    async def _run(self) -> None:
        while True:
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug must not stop replication silently: log it whole and go on.
                log.exception("replica fetcher of broker %d failed; retrying", self.leader_id)
                await asyncio.sleep(self.backoff_s)

    async def _round(self) -> None:
        """One request and its answer (or one wait when there is nothing to fetch)."""
        self._changed.clear()
        request, chosen = await self._request()
        if not chosen:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self.backoff_s)
            return
        send = asyncio.ensure_future(self._send(request))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({send, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            if not send.done():
                # The partitions changed (ask again with the new set), or we are stopping.
                send.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await send
            elif not send.cancelled():
                # Read its exception now: if we are being stopped, nobody reads it below and
                # asyncio would report a failed fetch as "never retrieved".
                send.exception()
        if send.cancelled():
            return
        try:
            results = send.result()
            self._last_answer = asyncio.get_running_loop().time()
        except (LinkError, MalformedFetchResponseError, HeadwaterError) as exc:
            log.warning(
                "replica fetch from broker %d at %s failed: %s",
                self.leader_id,
                self.leader_url,
                exc,
            )
            await asyncio.sleep(self.backoff_s)
            return
        await self._apply(results, chosen)

    def _stop_copying(self, followed: _Followed, key: PartitionKey, exc: HeadwaterError) -> None:
        """A storage error or a refused batch: this replica stops copying the partition until
        the metadata applier sets it up again."""
        log.error("replicating %s-%d failed: %s", key[0], key[1], exc)
        followed.paused = True
        if is_disk_failure(exc) and self.on_disk_failure is not None:
            self.on_disk_failure(exc.message)

    async def _send(self, request: ReplicaFetchRequest) -> list[PartitionResult]:
        timeout = request.max_wait_ms / 1000 + 10
        status, body = await self.link.post(
            FETCH_PATH,
            request.to_json(),
            content_type="application/json",
            accept=MEDIA_TYPE,
            timeout_s=timeout,
        )
        if status != 200:
            # The leader's error with its type and code (a 503 while it joins, a 400 for a
            # request it cannot read), not a bare one.
            try:
                parsed: object = orjson.loads(body)
            except orjson.JSONDecodeError:
                parsed = body[:300].decode("utf-8", "replace")
            raise BROKER.from_body(status, parsed)
        return decode_response(body)

    async def _apply(
        self, results: list[PartitionResult], chosen: dict[PartitionKey, _Followed]
    ) -> None:
        self.rounds += 1
        loop_now = asyncio.get_running_loop().time()
        for result in results:
            key = (result.topic, result.partition)
            followed = chosen.get(key)
            if followed is None or self.partitions.get(key) is not followed:
                continue  # removed or replaced while the request was out
            try:
                outcome = await followed.follower.apply(result, self.now_ms())
            except HeadwaterError as exc:
                self._stop_copying(followed, key, exc)
                continue
            if outcome.needs_metadata or outcome.retry:
                # Either side's metadata may be behind (a leader that has not taken the
                # partition yet answers 42101): ask again after a back-off; the metadata applier
                # replaces this follower state when this broker's view changes.
                followed.retry_at = loop_now + self.backoff_s
            if self.on_outcome is not None:
                self.on_outcome(followed.follower, outcome)
