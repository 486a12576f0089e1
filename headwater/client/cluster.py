"""``ClusterClient``: the brokers of one cluster as a client sees them, and where each request goes.

``bootstrap.servers`` is only the first contact. The client reads ``GET /cluster`` (every broker's
id and URL) and each topic's description (every partition's ``leader`` and ``leader_epoch``) from
any broker that answers, and sends each partition's fast-path request (raw batch produce, raw
batch fetch; offsets too) to that partition's leader, through one pooled
:class:`~headwater.client.broker.BrokerClient` per broker URL. Requests any broker answers
(topic admin, producer ids, listings) go to any reachable broker (:meth:`call_any`).

When a request fails, :meth:`ClusterClient.retry_delay` says how long to wait before sending it
again, or ``None`` when it must not be retried:

* ``421`` (42101, NOT_LEADER_OR_FOLLOWER): the body names the leader; it is taken when its
  ``leader_epoch`` is newer than the one known (the request goes there at once), otherwise the
  topic's metadata is refreshed and the request waits ``retry.backoff.ms``;
* ``503`` 50302 (no leader now) and the other retriable cluster answers (the 503s, 504 50401,
  the epoch conflicts 40904-40907 and 40909): wait ``Retry-After`` (else ``retry.backoff.ms``),
  refreshing the topic's metadata first;
* a connection error or timeout: the broker is marked unreachable for a while (metadata is then
  read from the others), the cluster and topic metadata are refreshed, and the request waits
  ``retry.backoff.ms``;
* ``404`` for a topic or partition the metadata lists (the leader has not applied the change
  that created it yet): refresh; retried while a fresh description still lists it.

Callers bound their retries by their own deadline (``delivery.timeout.ms``, the request
timeout); :meth:`call_leader` and :meth:`call_any` do the whole loop.

Metadata is cached per topic and read again when asked ``fresh`` (a partition the cache does not
have, the producer's periodic refresh), or when an error made it stale -- then at most once per
``min_refresh_ms`` (100 ms) per topic, so a burst of failures makes one refresh.

A broker without ``GET /cluster`` (404: one that predates the cluster) is a cluster of one: the
bootstrap broker that answered leads every partition, and a connection error moves on to the next
bootstrap URL, as clients did before brokers formed a cluster.

Threads: every method may be called from any thread (the producer's sender and workers, a
consumer's poll thread, Spark tasks). The cached state (broker clients, the cluster view, topic
routes, unreachable marks) is guarded by one lock held only to read or replace a dict entry,
never across a request; metadata fetches are serialized per topic (and for ``GET /cluster``) by a
lock of their own, so threads that all find a stale entry make one request between them and the
others use its answer. ``BrokerClient`` is itself thread-safe.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import httpx

from headwater.client.broker import BrokerClient, ClusterDescription, TopicDescription
from headwater.closeable import Closeable
from headwater.errors import (
    FencedLeaderEpochError,
    HeadwaterError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    PartitionNotFoundError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    StalePartitionEpochError,
    TopicNotFoundError,
    UnknownLeaderEpochError,
)
from headwater.types import BrokerId, PartitionId

log = logging.getLogger("headwater.client")

T = TypeVar("T")

# Conflicts a refresh and a retry resolve (docs/cluster.md: every cluster code but 40908).
_RETRIABLE_CONFLICTS = (
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    StaleControllerEpochError,
    StaleBrokerEpochError,
    StalePartitionEpochError,
)
# How long a broker that did not answer is tried only after the others.
UNREACHABLE_FOR_S = 2.0
# The longest wait a Retry-After may impose between two attempts.
MAX_RETRY_AFTER_S = 5.0


class ClientSettings(Protocol):
    """What a client's settings tell its cluster client (``ProducerConfig``, ``ConsumerConfig``,
    ``AdminConfig`` of :mod:`headwater.config`)."""

    @property
    def bootstrap_servers(self) -> tuple[str, ...]: ...
    @property
    def client_id(self) -> str: ...
    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def retry_backoff_ms(self) -> int: ...
    def ssl_context(self) -> ssl.SSLContext: ...


@dataclass(slots=True)
class _Route:
    """A partition's leader as last learnt, and its epoch (-1 when the broker reports none)."""

    leader: BrokerId
    epoch: int


@dataclass(slots=True)
class _TopicEntry:
    description: TopicDescription
    routes: dict[PartitionId, _Route]
    fetched: float  # time.monotonic() of the answer
    stale: bool = False


class ClusterClient(Closeable):
    """Routes requests to the brokers of the cluster ``urls`` bootstrap into (see the module
    docstring). ``timeout`` (seconds) is each request's; ``retry_backoff_ms`` the wait between
    attempts that no ``Retry-After`` or newer leader shortens."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        client_id: str = "headwater-python",
        max_connections: int = 16,
        retry_backoff_ms: int = 100,
        min_refresh_ms: int = 100,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one bootstrap broker URL is needed")
        self.bootstrap = tuple(u.rstrip("/") for u in urls)
        self.timeout = timeout
        self.retry_backoff = retry_backoff_ms / 1000
        self._min_refresh = min_refresh_ms / 1000
        self._transport = transport
        self._client_id = client_id
        self._max_connections = max_connections
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._fetch_locks: dict[str, threading.Lock] = {}
        self._clients: dict[str, BrokerClient] = {}
        self._unreachable: dict[str, float] = {}  # url -> monotonic time it stops counting
        self._cluster: ClusterDescription | None = None
        self._urls: dict[BrokerId, str] = {}  # broker id -> URL (GET /cluster, 421 bodies)
        self._standalone: str | None = None  # the URL of a broker without GET /cluster
        self._cluster_fetched = -1e9
        self._cluster_stale = True
        self._topics: dict[str, _TopicEntry] = {}
        self._closed = False

    @classmethod
    def of_client(
        cls,
        settings: ClientSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        max_connections: int = 16,
    ) -> ClusterClient:
        """The cluster client of a producer, consumer or admin client with these settings."""
        return cls(
            settings.bootstrap_servers,
            timeout=settings.request_timeout_ms / 1000,
            transport=transport,
            client_id=settings.client_id,
            max_connections=max_connections,
            retry_backoff_ms=settings.retry_backoff_ms,
            ssl_context=settings.ssl_context(),
        )

    # -- brokers ------------------------------------------------------------------------------

    def broker(self, url: str) -> BrokerClient:
        """The pooled client of the broker at ``url``."""
        url = url.rstrip("/")
        with self._lock:
            client = self._clients.get(url)
            if client is None:
                if self._closed:
                    raise RuntimeError("the cluster client is closed")
                client = self._clients[url] = BrokerClient(
                    url,
                    timeout=self.timeout,
                    transport=self._transport,
                    client_id=self._client_id,
                    max_connections=self._max_connections,
                    ssl_context=self._ssl_context,
                )
            return client

    def mark_unreachable(self, url: str) -> None:
        """``url`` did not answer: try the others first for a while, and refresh everything
        learnt from it."""
        with self._lock:
            self._unreachable[url.rstrip("/")] = time.monotonic() + UNREACHABLE_FOR_S
            self._cluster_stale = True
            for entry in self._topics.values():
                entry.stale = True

    def _sources(self) -> list[str]:
        """Broker URLs to ask for metadata or a request any broker answers: a standalone
        broker first, then the cluster's active brokers, then the bootstrap URLs; unreachable
        ones last (the longest unreachable first among them)."""
        with self._lock:
            urls: list[str] = []
            if self._standalone is not None:
                urls.append(self._standalone)
            if self._cluster is not None:
                urls += [b.url for b in self._cluster.brokers if b.state == "active"]
            urls += self.bootstrap
            urls = list(dict.fromkeys(urls))
            now = time.monotonic()
            down = {u: t for u, t in self._unreachable.items() if t > now}
        return [u for u in urls if u not in down] + sorted(
            (u for u in urls if u in down), key=lambda u: down[u]
        )

    def _is_unreachable(self, url: str) -> bool:
        with self._lock:
            return self._unreachable.get(url, 0.0) > time.monotonic()

    def _fetch_lock(self, key: str) -> threading.Lock:
        with self._lock:
            lock = self._fetch_locks.get(key)
            if lock is None:
                lock = self._fetch_locks[key] = threading.Lock()
            return lock

    # -- metadata -----------------------------------------------------------------------------

    @property
    def standalone(self) -> bool:
        """True when the brokers have no ``GET /cluster`` (each one serves everything)."""
        self._ensure_cluster()
        return self._standalone is not None

    def describe_cluster(self, *, fresh: bool = False) -> ClusterDescription | None:
        """The cluster as ``GET /cluster`` describes it; None from brokers without it."""
        if fresh:
            with self._lock:
                self._cluster_stale = True
        self._ensure_cluster()
        return self._cluster

    def _ensure_cluster(self) -> None:
        with self._lock:
            due = self._cluster_stale and (
                time.monotonic() - self._cluster_fetched >= self._min_refresh
            )
            if not due and (self._cluster is not None or self._standalone is not None):
                return
            asked = time.monotonic()
        with self._fetch_lock("cluster"):
            with self._lock:
                if self._cluster_fetched >= asked:
                    return  # another thread refreshed it while this one waited
            self._refresh_cluster()

    def _refresh_cluster(self) -> None:
        last: Exception | None = None
        for url in self._sources():
            try:
                description = self.broker(url).describe_cluster()
            except httpx.TransportError as exc:
                self._note_unreachable(url)
                last = exc
                continue
            except HeadwaterError as exc:
                if exc.http_status < 500:
                    raise
                last = exc
                continue
            with self._lock:
                self._cluster_fetched = time.monotonic()
                self._cluster_stale = False
                if description is None:
                    if self._standalone != url:
                        log.info("broker %s has no GET /cluster: it serves every partition", url)
                    self._standalone, self._cluster = url, None
                else:
                    self._standalone, self._cluster = None, description
                    self._urls.update({b.broker_id: b.url for b in description.brokers})
            return
        assert last is not None
        raise last

    def _note_unreachable(self, url: str) -> None:
        with self._lock:
            self._unreachable[url] = time.monotonic() + UNREACHABLE_FOR_S

    def describe_topic(self, topic: str, *, fresh: bool = False) -> TopicDescription:
        """``topic``'s description from any broker (cached; ``fresh`` reads it again now,
        unless another thread's read began meanwhile)."""
        entry = self._topic(topic, fresh=fresh)
        return entry.description

    def partition_count(self, topic: str, *, fresh: bool = False) -> int:
        return len(self.describe_topic(topic, fresh=fresh).partitions)

    def invalidate(self, topic: str) -> None:
        """Read ``topic``'s metadata again before its next use."""
        with self._lock:
            entry = self._topics.get(topic)
            if entry is not None:
                entry.stale = True

    def _topic(self, topic: str, *, fresh: bool = False) -> _TopicEntry:
        with self._lock:
            entry = self._topics.get(topic)
            now = time.monotonic()
            recent = entry is not None and now - entry.fetched < self._min_refresh
            if entry is not None and not fresh and (not entry.stale or recent):
                return entry
        asked = time.monotonic()
        with self._fetch_lock(f"topic:{topic}"):
            with self._lock:
                entry = self._topics.get(topic)
                if entry is not None and entry.fetched >= asked:
                    return entry  # refreshed by another thread while this one waited
            return self._refresh_topic(topic)

    def _refresh_topic(self, topic: str) -> _TopicEntry:
        self._ensure_cluster()
        last: Exception | None = None
        for url in self._sources():
            try:
                description = self.broker(url).describe_topic(topic)
            except httpx.TransportError as exc:
                self._note_unreachable(url)
                last = exc
                continue
            except TopicNotFoundError:
                with self._lock:
                    self._topics.pop(topic, None)
                raise
            except HeadwaterError as exc:
                if exc.http_status < 500:
                    raise
                last = exc
                continue
            with self._lock:
                old = self._topics.get(topic)
                routes: dict[PartitionId, _Route] = {}
                for p in description.partitions:
                    route = _Route(p.leader, p.leader_epoch)
                    known = old.routes.get(p.partition) if old is not None else None
                    # A 421 may have taught a newer leader than this (lagging) broker knows.
                    if known is not None and known.epoch > route.epoch >= 0:
                        route = known
                    routes[p.partition] = route
                entry = _TopicEntry(description, routes, time.monotonic())
                self._topics[topic] = entry
            return entry
        assert last is not None
        raise last

    # -- routing ------------------------------------------------------------------------------

    def leader(self, topic: str, partition: int) -> BrokerClient:
        """The client of ``topic``/``partition``'s leader. Raises ``LeaderNotAvailableError``
        while it has none, ``TopicNotFoundError``/``PartitionNotFoundError`` when the cluster
        does not have it, and transport errors when no broker answers for metadata."""
        self._ensure_cluster()
        standalone = self._standalone
        if standalone is not None:
            return self.broker(standalone)
        entry = self._topic(topic)
        route = entry.routes.get(PartitionId(partition))
        if route is None:
            entry = self._topic(topic, fresh=True)
            route = entry.routes.get(PartitionId(partition))
            if route is None:
                raise PartitionNotFoundError(
                    f"topic {topic!r} has {len(entry.routes)} partitions; {partition} is not one"
                )
        if route.leader < 0:
            raise LeaderNotAvailableError(f"{topic}/{partition} has no leader now")
        with self._lock:
            url = self._urls.get(route.leader)
        if url is None:
            with self._lock:
                self._cluster_stale = True
            self._ensure_cluster()
            with self._lock:
                url = self._urls.get(route.leader)
            if url is None:
                raise LeaderNotAvailableError(
                    f"{topic}/{partition}: leader {route.leader} is not a broker of the cluster yet"
                )
        return self.broker(url)

    def retry_delay(
        self,
        topic: str | None,
        partition: int | None,
        error: BaseException,
        broker: BrokerClient | None = None,
    ) -> float | None:
        """Seconds to wait before sending the request that failed with ``error`` again (to
        ``topic``/``partition``'s leader, when given, or to ``broker``), after updating the
        metadata it shows stale; None when the error is final."""
        if isinstance(error, httpx.TransportError):
            if broker is not None:
                self.mark_unreachable(broker.base_url)
            else:
                with self._lock:
                    self._cluster_stale = True
            with self._lock:
                if self._standalone is not None:
                    self._cluster_stale = True  # the next bootstrap URL takes over
            return self.retry_backoff
        if not isinstance(error, HeadwaterError):
            return None
        if isinstance(error, NotLeaderOrFollowerError):
            if (
                topic is not None
                and partition is not None
                and self._learn_leader(topic, PartitionId(partition), error, broker)
            ):
                return 0.0
            if topic is not None:
                self.invalidate(topic)
            return self.retry_backoff
        if isinstance(error, TopicNotFoundError | PartitionNotFoundError):
            return self._missing_delay(topic, partition)
        if isinstance(error, _RETRIABLE_CONFLICTS) or error.http_status in (503, 504):
            if topic is not None:
                self.invalidate(topic)
            if error.retry_after is not None:
                return min(max(error.retry_after, self.retry_backoff), MAX_RETRY_AFTER_S)
            return self.retry_backoff
        if error.http_status >= 500:
            return self.retry_backoff
        return None

    def _learn_leader(
        self,
        topic: str,
        partition: PartitionId,
        error: NotLeaderOrFollowerError,
        asked: BrokerClient | None,
    ) -> bool:
        """Take the leader a 421 names if it is news; True when the retry can go there now."""
        if error.leader_id < 0 or not error.leader_url:
            return False
        url = error.leader_url.rstrip("/")
        if asked is not None and url == asked.base_url:
            return False  # the broker names itself: its metadata is in flux
        with self._lock:
            entry = self._topics.get(topic)
            route = entry.routes.get(partition) if entry is not None else None
            if route is not None and error.leader_epoch <= route.epoch:
                if entry is not None:
                    entry.stale = True
                return False  # the answering broker is behind what is known
            self._urls[BrokerId(error.leader_id)] = url
            if entry is not None:
                entry.routes[partition] = _Route(BrokerId(error.leader_id), error.leader_epoch)
        log.debug("%s/%s: leader is now %s (%s)", topic, partition, error.leader_id, url)
        return True

    def _missing_delay(self, topic: str | None, partition: int | None) -> float | None:
        """A 404 from a leader for what the cached metadata lists: retry while a fresh
        description still lists it (the leader has not applied its creation yet)."""
        if topic is None or self._standalone is not None:
            return None
        with self._lock:
            entry = self._topics.get(topic)
        if entry is None or (partition is not None and partition not in entry.routes):
            return None
        try:
            fresh = self._topic(topic, fresh=True)
        except TopicNotFoundError:
            return None
        except (httpx.TransportError, HeadwaterError):
            return self.retry_backoff
        if partition is not None and partition not in fresh.routes:
            return None
        return self.retry_backoff

    # -- whole retry loops --------------------------------------------------------------------

    def call_leader(
        self,
        topic: str,
        partition: int,
        call: Callable[[BrokerClient], T],
        *,
        timeout: float | None = None,
    ) -> T:
        """``call`` with ``topic``/``partition``'s leader, retried as :meth:`retry_delay` says
        for up to ``timeout`` seconds (default: the request timeout); the last error is raised
        when time is up."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            broker: BrokerClient | None = None
            try:
                broker = self.leader(topic, partition)
                return call(broker)
            except (httpx.TransportError, HeadwaterError) as exc:
                delay = self.retry_delay(topic, partition, exc, broker)
                if delay is None or time.monotonic() + delay >= deadline:
                    raise
                log.debug("retrying %s/%s in %.2fs: %s", topic, partition, delay, exc)
                time.sleep(delay)

    def call_any(
        self,
        call: Callable[[BrokerClient], T],
        *,
        timeout: float | None = None,
        resend: bool = True,
    ) -> T:
        """``call`` with any reachable broker, moving to the next on connection errors and
        retrying the retriable answers for up to ``timeout`` seconds (default: the request
        timeout). ``resend=False`` (requests that change something) retries a connection
        error only when the request cannot have been sent (connect failures)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with contextlib.suppress(httpx.TransportError, HeadwaterError):
            self._ensure_cluster()  # to know every broker; the loop below says what fails
        while True:
            url = self._sources()[0]
            try:
                return call(self.broker(url))
            except httpx.TransportError as exc:
                self.mark_unreachable(url)
                sent = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if (sent and not resend) or time.monotonic() >= deadline:
                    raise
                if self._is_unreachable(self._sources()[0]):
                    time.sleep(self.retry_backoff)  # every broker failed lately: pace the tries
            except HeadwaterError as exc:
                delay = self.retry_delay(None, None, exc)
                if delay is None or time.monotonic() + delay >= deadline:
                    raise
                time.sleep(delay)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()
