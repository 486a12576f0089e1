"""The coordinator's Redis connection: the client, the typed error when Redis is gone, the probe.

The seam: the other store modules never see redis-py's connection errors. Every store method
that reaches Redis is wrapped in :func:`reaching_redis`, so a lost connection surfaces as
:class:`~headwater.groups.errors.StoreUnavailableError` (503, 50311) and the routes answer it
like any other typed error. Reconnecting needs no code of ours: the pool drops a connection that
failed and opens a new one on its next use, so requests succeed again as soon as Redis answers.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from headwater.groups.errors import StoreUnavailableError

P = ParamSpec("P")
T = TypeVar("T")

# What "Redis does not answer" looks like from redis-py: refused, reset or missing socket, a
# server still loading its file (BusyLoadingError is a ConnectionError), no reply in time, or a
# replica that cannot take writes.
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)

MAX_CONNECTIONS = 64
# A request fails fast when Redis is gone, instead of queueing behind a dead server.
CONNECT_TIMEOUT_S = 2.0
# No command of the coordinator blocks in Redis (parked heartbeats wait on pub/sub, whose
# reads redis-py exempts from this), so a reply slower than this means Redis is stuck.
COMMAND_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 1.0


def connect(url: str) -> Redis:
    """The client every store module shares.

    One retry, on a dropped connection only: after a Redis restart each pooled connection fails
    once before the pool replaces it, and the retry keeps that from reaching a client. Repeating
    a command is safe here -- commits and fast heartbeats write absolute values, and a group
    transaction that loses its connection while watching is rerun from a fresh read.
    """
    retry = Retry(ExponentialBackoff(cap=0.1, base=0.02), 1, (RedisConnectionError,))
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        # Wait for a free connection rather than fail when many requests arrive at once.
        timeout=COMMAND_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=COMMAND_TIMEOUT_S,
        retry=retry,
    )
    return Redis(connection_pool=pool)


def unavailable(exc: Exception) -> StoreUnavailableError:
    """The typed error for a redis-py connection failure (its detail stays in the server log)."""
    return StoreUnavailableError(
        f"The coordinator's store (Redis) does not answer ({type(exc).__name__}); retry"
    )


def reaching_redis(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Mark a store method that talks to Redis: a lost connection raises StoreUnavailableError."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except UNAVAILABLE as exc:
            raise unavailable(exc) from exc

    return call


async def probe(url: str) -> None:
    """PING Redis over a new connection; raises StoreUnavailableError if it does not answer now.

    A new connection, not a pooled one: a pooled connection can outlive what new ones need (a
    unix socket removed from under a running server keeps old connections working while every
    new one fails), and readiness must say whether the coordinator can reach Redis now.
    """
    client = Redis.from_url(
        url,
        socket_connect_timeout=PROBE_TIMEOUT_S,
        socket_timeout=PROBE_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(), 0),
        single_connection_client=True,
    )
    try:
        await client.ping()
    except UNAVAILABLE as exc:
        raise unavailable(exc) from exc
    finally:
        await client.aclose()
