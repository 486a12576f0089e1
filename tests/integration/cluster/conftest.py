"""Cluster integration fixtures: a metadata database (a SQLite file or a private PostgreSQL
database), and brokers-without-HTTP ("members"), each with its own store connections."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from headwater_broker.cluster import session
from headwater_broker.cluster.controller import Controller
from headwater_broker.cluster.metadata_follower import MetadataFollower
from headwater_broker.cluster.session import Registration
from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.cluster.store import MetadataStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same tests run on a shared SQLite file and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cluster.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def stores(metadata_url: str) -> Iterator[list[MetadataStore]]:
    """Stores opened by a test (closed afterwards); each is its own engine and connections."""
    opened: list[MetadataStore] = []
    yield opened
    for store in opened:
        store.close()


def fast_settings(
    url: str,
    session_timeout_ms: int = 800,
    heartbeat_interval_ms: int = 100,
    controller_lease_ms: int = 2000,
    metadata_poll_ms: int = 50,
) -> ClusterSettings:
    """Timeouts short enough for tests that wait them out, long enough that a loaded machine
    (two cores shared by several test runs) does not miss a renewal or heartbeat."""
    return ClusterSettings(
        metadata_url=url,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        controller_lease_ms=controller_lease_ms,
        metadata_poll_ms=metadata_poll_ms,
    )


@dataclass
class Member:
    """A broker without HTTP: its own store, registration, follower and controller."""

    broker_id: int
    store: MetadataStore
    registration: Registration
    follower: MetadataFollower
    controller: Controller

    async def heartbeat(self) -> None:
        await self.store.call(
            session.heartbeat, self.store, self.registration, self.follower.image.offset
        )

    async def catch_up(self) -> None:
        await self.follower.poll()

    def hold_lease(self, tasks: list[asyncio.Task[None]]) -> asyncio.Task[None]:
        """Renew this member's controller lease in the background (as the controller's lease
        task does), so a slow test step cannot let it run out; cancel the task to "pause"."""

        async def renew() -> None:
            while True:
                await self.controller.campaign_or_renew()
                await asyncio.sleep(0.05)

        task = asyncio.create_task(renew())
        tasks.append(task)
        return task


class Cluster:
    """Members on one metadata database, driven step by step by the test."""

    def __init__(self, url: str, stores: list[MetadataStore], settings: ClusterSettings) -> None:
        self.url = url
        self.stores = stores
        self.settings = settings

    def store(self) -> MetadataStore:
        store = MetadataStore(self.url, stall_timeout_ms=self.settings.controller_lease_ms)
        self.stores.append(store)
        return store

    async def member(self, broker_id: int, rack: str | None = None) -> Member:
        store = self.store()
        registration = await store.call(
            session.register,
            store,
            broker_id,
            f"http://127.0.0.1:{19000 + broker_id}",
            rack,
            self.settings.session_timeout_ms,
        )
        follower = MetadataFollower(store, self.settings.metadata_poll_ms)
        await follower.load()
        controller = Controller(store, follower, self.settings, broker_id)
        return Member(broker_id, store, registration, follower, controller)

    async def members(self, *broker_ids: int) -> list[Member]:
        return [await self.member(b) for b in broker_ids]


@pytest.fixture
async def background() -> AsyncIterator[list[asyncio.Task[None]]]:
    """Tasks a test starts (lease renewals); cancelled at its end."""
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
def cluster(metadata_url: str, stores: list[MetadataStore]) -> Cluster:
    return Cluster(metadata_url, stores, fast_settings(metadata_url))


async def settle(members: list[Member], controller: Member, rounds: int = 3) -> None:
    """Heartbeat everyone, let the controller reconcile, everyone catch up: a few times."""
    for _ in range(rounds):
        for m in members:
            await m.heartbeat()
        assert await controller.controller.campaign_or_renew()
        await controller.controller.reconcile()
        for m in members:
            await m.catch_up()


async def wait_contact(store: MetadataStore, ms: float) -> None:
    """Wait until the store has had ``ms`` of unbroken database contact (the fencing grace)."""
    while store.contact_ms() < ms:
        await asyncio.sleep(0.02)


async def keep_alive(beating: list[Member], controller: Member, seconds: float) -> None:
    """For ``seconds``: the ``beating`` members heartbeat and the controller renews its lease."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in beating:
            await m.heartbeat()
        assert await controller.controller.campaign_or_renew()
        await asyncio.sleep(0.05)
