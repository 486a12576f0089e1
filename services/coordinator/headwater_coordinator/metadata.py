"""Topic metadata and end offsets from the brokers, cached briefly and fetched once per topic.

The coordinator needs partition counts (for assignment), end offsets (lag, offset validation,
resets) and timestamp lookups. Brokers are tried in order until one answers; concurrent requests
for the same topic share one fetch, so a burst of heartbeats makes one broker call.

In a cluster a topic's description may come without the offsets of partitions the answering
broker cannot read (``null``, or -1 while their leader is down); those are asked of each
partition's leader (its URL from ``GET /cluster``, cached like topics), else of any broker. A
partition without a leader has no known offsets for now: it still counts for assignment, lag
leaves it out, and validating a commit or a reset against it answers 503 50302 (retriable)
rather than guessing.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from headwater.groups.errors import BrokersUnavailableError, UnknownTopicOrPartitionError
from headwater.types import Offset, PartitionId
from headwater_coordinator import names
from headwater_kernel.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("headwater.coordinator")


def topic_path(topic: str, *rest: str | int) -> str:
    """``/topics/{topic}/...`` with every segment escaped (``/``, ``?``, ``#``, ``.`` included)."""
    segments = [quote(str(s), safe="") for s in (topic, *rest)]
    # quote() leaves "." alone, and a "." or ".." segment is collapsed by URL normalisation.
    segments = [s.replace(".", "%2E") if s in (".", "..") else s for s in segments]
    return "/topics/" + "/".join(segments)


@dataclass(frozen=True)
class TopicInfo:
    """A topic's partition count and the offsets known now (a partition without a leader has
    none: it is absent from ``beginning`` and ``end``)."""

    name: str
    beginning: dict[PartitionId, Offset]
    end: dict[PartitionId, Offset]
    count: int = -1

    @property
    def partitions(self) -> int:
        return self.count if self.count >= 0 else len(self.end)

    def has(self, partition: PartitionId) -> bool:
        return 0 <= partition < self.partitions

    def require_end(self, partition: PartitionId) -> Offset:
        """``partition``'s end offset; 503 50302 while no broker can tell it (no leader)."""
        end = self.end.get(partition)
        if end is None:
            raise BrokersUnavailableError(
                f"{self.name}/{partition} has no leader now: its offsets are unknown; retry"
            )
        return end


class BrokerMetadata:
    """Reads ``GET /topics``, ``GET /topics/{t}`` and offset lookups from a list of brokers."""

    def __init__(
        self,
        brokers: list[str],
        ttl_s: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 5.0,
        clock: Clock = SYSTEM_CLOCK,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.brokers = brokers
        self.ttl_s = ttl_s
        self.clock = clock
        self._http = httpx.AsyncClient(
            transport=transport, timeout=timeout_s, verify=ssl_context or True
        )
        self._cache: dict[str, tuple[float, TopicInfo | None]] = {}
        self._leaders: tuple[float, dict[int, str]] = (-1e9, {})  # GET /cluster: id -> URL
        self._inflight: dict[str, asyncio.Future[TopicInfo | None]] = {}
        self._background: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        for task in self._background:
            task.cancel()
        await self._http.aclose()

    async def _get(self, path: str, params: dict[str, int] | None = None) -> httpx.Response:
        last: Exception | None = None
        for base in self.brokers:
            try:
                response = await self._http.get(base.rstrip("/") + path, params=params)
            except httpx.HTTPError as exc:
                last = exc
                continue
            if response.status_code >= 500:
                last = RuntimeError(f"{base}: HTTP {response.status_code}")
                continue
            return response
        raise BrokersUnavailableError(f"no broker answered {path}: {last}")

    async def _fetch(self, topic: str) -> TopicInfo | None:
        if not names.is_valid(topic):
            # No topic has it; and the broker decodes an escaped "/" before routing, so a name
            # holding one could reach another route however it is escaped.
            return None
        response = await self._get(topic_path(topic))
        if response.status_code == 404:
            return None
        beginning: dict[PartitionId, Offset] = {}
        end: dict[PartitionId, Offset] = {}
        unknown: dict[PartitionId, int] = {}  # partition -> its leader (-1 none)
        try:
            response.raise_for_status()
            partitions = response.json()["partitions"]
            for p in partitions:
                partition = PartitionId(p["partition"])
                begin, last = p.get("beginning_offset"), p.get("end_offset")
                if begin is None or last is None or begin < 0 or last < 0:
                    leader = p.get("leader")
                    unknown[partition] = leader if isinstance(leader, int) else -1
                else:
                    beginning[partition], end[partition] = Offset(begin), Offset(last)
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError) as exc:
            raise _unexpected(response, exc) from exc
        if unknown:
            found = await asyncio.gather(
                *(self._leader_offsets(topic, p, leader) for p, leader in unknown.items())
            )
            for partition, offsets in zip(unknown, found, strict=True):
                if offsets is not None:
                    beginning[partition], end[partition] = offsets
        return TopicInfo(topic, beginning, end, count=len(partitions))

    async def _leader_urls(self) -> dict[int, str]:
        """Broker id -> URL from ``GET /cluster`` (cached for the TTL; empty from brokers
        without it)."""
        fetched, urls = self._leaders
        if self.clock.monotonic() - fetched < self.ttl_s:
            return urls
        try:
            response = await self._get("/cluster")
            body = response.json() if response.status_code == 200 else {}
            urls = {int(b["broker_id"]): str(b["url"]) for b in body.get("brokers", ())}
        except (BrokersUnavailableError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("reading GET /cluster failed: %s", exc)
        self._leaders = (self.clock.monotonic(), urls)
        return urls

    async def _leader_offsets(
        self, topic: str, partition: PartitionId, leader: int
    ) -> tuple[Offset, Offset] | None:
        """``partition``'s (beginning, end) from its leader, else from any broker (which
        forwards); None when it has no leader or nobody answers."""
        if leader < 0:
            return None
        path = topic_path(topic, "partitions", int(partition), "offsets")
        url = (await self._leader_urls()).get(leader)
        try:
            if url is not None:
                try:
                    response = await self._http.get(url.rstrip("/") + path)
                except httpx.HTTPError:
                    response = await self._get(path)
            else:
                response = await self._get(path)
            if response.status_code != 200:
                return None
            body = response.json()
            return Offset(int(body["beginning_offset"])), Offset(int(body["end_offset"]))
        except (BrokersUnavailableError, ValueError, KeyError, TypeError) as exc:
            log.info("offsets of %s/%s unknown for now: %s", topic, partition, exc)
            return None

    async def topic(
        self, name: str, *, fresh: bool = False, stale_ok: bool = False
    ) -> TopicInfo | None:
        """The topic's partitions and offsets (None when no broker knows it).

        ``stale_ok``: an expired cache entry is returned at once and refreshed in the
        background, so a slow broker never holds up the caller (heartbeats, which run under
        the group's lock); the next caller sees the refreshed sizes.
        """
        now = self.clock.monotonic()
        cached = self._cache.get(name)
        if cached is not None and not fresh and cached[0] > now:
            return cached[1]
        if cached is not None and stale_ok and not fresh:
            if name not in self._inflight:
                task = asyncio.create_task(self._refresh_quietly(name))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            return cached[1]
        pending = self._inflight.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[TopicInfo | None] = asyncio.get_running_loop().create_future()
        self._inflight[name] = future
        try:
            info = await self._fetch(name)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters (if any) re-raise it themselves
            raise
        finally:
            self._inflight.pop(name, None)
        self._cache[name] = (self.clock.monotonic() + self.ttl_s, info)
        future.set_result(info)
        return info

    async def _refresh_quietly(self, name: str) -> None:
        try:
            await self.topic(name, fresh=True)
        except Exception as exc:  # the stale entry stays; the next caller retries
            log.warning("refreshing metadata of %s failed: %s", name, exc)

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of every existing topic among ``topics`` (missing ones left out);
        possibly up to one refresh stale (see ``stale_ok``)."""
        names = sorted(set(topics))
        infos = await asyncio.gather(*(self.topic(t, stale_ok=True) for t in names))
        return {t: i.partitions for t, i in zip(names, infos, strict=True) if i is not None}

    async def require(
        self, topic: str, partition: PartitionId, *, fresh: bool = False
    ) -> TopicInfo:
        """The topic, which must have ``partition``. A cached answer may be stale (end offsets
        only grow); a missing topic or partition is looked up afresh before it is refused."""
        info = await self.topic(topic, fresh=fresh, stale_ok=True)
        if (info is None or partition not in info.end) and not fresh:
            info = await self.topic(topic, fresh=True)
        if info is None or not info.has(partition):
            raise UnknownTopicOrPartitionError(f"{topic}/{partition} does not exist")
        info.require_end(partition)
        return info

    async def offset_for_time(
        self, topic: str, partition: PartitionId, timestamp_ms: int
    ) -> Offset | None:
        if not names.is_valid(topic):
            raise UnknownTopicOrPartitionError(f"{topic}/{partition} does not exist")
        response = await self._get(
            topic_path(topic, "partitions", int(partition), "offsets", "lookup"),
            params={"timestamp": timestamp_ms},
        )
        if response.status_code == 404:
            raise UnknownTopicOrPartitionError(f"{topic}/{partition} does not exist")
        try:
            response.raise_for_status()
            offset = response.json()["offset"]
            return None if offset is None else Offset(int(offset))
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError) as exc:
            raise _unexpected(response, exc) from exc


def _unexpected(response: httpx.Response, exc: Exception) -> BrokersUnavailableError:
    """A broker URL whose answer is not a broker's (another service, a proxy's error page)."""
    return BrokersUnavailableError(
        f"{response.request.url} answered HTTP {response.status_code} ({type(exc).__name__}), "
        "not as a broker does"
    )
