"""The group side of a ``headwater.Consumer``: subscription, applying assignments, commits.

Everything here runs on the consumer's poll thread except the membership loop
(``headwater.groups.membership``). Order of events when the coordinator moves partitions:

1. the heartbeat thread receives the new (smaller) assignment;
2. the next ``poll()`` commits the revoked partitions' positions (if ``enable.auto.commit``),
   calls ``on_revoke``, stops fetching them, and reports what it still owns;
3. that report releases the partitions; their new owner's ``poll()`` calls ``on_assign`` and
   starts from the committed offset (else ``auto.offset.reset``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import httpx

from headwater.config import ConsumerConfig
from headwater.errors import HeadwaterError, ServiceUnavailableError
from headwater.groups.client import DEFAULT_COORDINATOR, CoordinatorClient
from headwater.groups.errors import RETRIABLE
from headwater.groups.membership import RETRY_BACKOFF_S, GroupMembership
from headwater.topic_partition import TopicPartition
from headwater.types import Offset

log = logging.getLogger("headwater.groups")

GroupCallback = Callable[[list[TopicPartition]], None]
"""Called with the partitions that changed, sorted (the consumer binds itself as the first
argument of the user's ``on_assign``/``on_revoke``/``on_lost``)."""
# How long the first poll() after subscribe() waits for the group's first answer.
FIRST_ASSIGNMENT_WAIT_S = 2.0
# What initial_position() waits out: the coordinator restarting, its Redis or brokers away.
_WAIT_OUT: tuple[type[Exception], ...] = (
    httpx.TransportError,
    ServiceUnavailableError,
    *RETRIABLE,
)


class PartitionOwner(Protocol):
    """The consumer as its group sees it: what it reads, taking a new assignment, and where it
    stands in each partition. ``headwater.Consumer`` is one; the group knows nothing else of it.
    """

    def assignment(self) -> list[TopicPartition]:
        """The partitions read now."""
        ...

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions`` from now on."""
        ...

    def committable_positions(self) -> dict[TopicPartition, Offset]:
        """The next offset to read of each assigned partition that has one: a default commit."""
        ...


class ConsumerGroup:
    """One consumer's view of its group (``group.id``); created by ``Consumer.subscribe``."""

    def __init__(self, consumer: PartitionOwner, config: ConsumerConfig) -> None:
        if not config.group_id:
            raise ValueError("subscribe() needs group.id")
        self.consumer = consumer
        self.config = config
        self.group_id = config.group_id
        self.client = CoordinatorClient(
            config.coordinator_url or DEFAULT_COORDINATOR,
            timeout=config.request_timeout_ms / 1000,
            ssl_context=config.ssl_context(),
        )
        self.membership: GroupMembership | None = None
        self.on_assign: GroupCallback | None = None
        self.on_revoke: GroupCallback | None = None
        self.on_lost: GroupCallback | None = None
        self._losses = 0
        self._committed: dict[TopicPartition, Offset] | None = None
        self._last_auto_commit = time.monotonic()
        self._async_commits: ThreadPoolExecutor | None = None
        self._first_poll = True

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: GroupCallback | None,
        on_revoke: GroupCallback | None,
        on_lost: GroupCallback | None,
        instance_id: str | None,
    ) -> None:
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost
        if self.membership is not None:
            self.membership.topics = frozenset(topics)
            self.membership.report_owned(self.consumer.assignment())
            return
        # As in KIP-848, the session timeout is the coordinator's (COORDINATOR_SESSION_TIMEOUT_MS),
        # not the client's session.timeout.ms; the HTTP API still accepts one per member.
        self.membership = GroupMembership(
            self.client, self.group_id, topics, instance_id=instance_id
        )
        self.membership.start()

    # -- the poll thread ----------------------------------------------------------------------

    def before_poll(self) -> None:
        """Apply what the coordinator said since the last poll; auto-commit when due."""
        membership = self.membership
        if membership is None:
            return
        if self._first_poll:
            self._first_poll = False
            membership.wait_for_assignment(FIRST_ASSIGNMENT_WAIT_S)
        target, losses = membership.take_assignment()
        current = set(self.consumer.assignment())
        if losses != self._losses:
            # Fenced: the partitions may already be someone else's; drop them, commit nothing.
            self._losses = losses
            if current:
                self._callback(self.on_lost or self.on_revoke, current)
                self.consumer.assign([])
                current = set()
            self._committed = None
        if membership.fatal is not None:
            raise membership.fatal
        if target != current:
            revoked, added = current - target, target - current
            if revoked:
                if self.config.enable_auto_commit:
                    self._commit_quietly(
                        {
                            tp: o
                            for tp, o in self.consumer.committable_positions().items()
                            if tp in revoked
                        }
                    )
                self._callback(self.on_revoke, revoked)
            self._committed = None
            self.consumer.assign(sorted(target))
            if added:
                self._callback(self.on_assign, added)
        membership.report_owned(self.consumer.assignment())
        if self.config.enable_auto_commit:
            now = time.monotonic()
            if now - self._last_auto_commit >= self.config.auto_commit_interval_ms / 1000:
                self._last_auto_commit = now
                self._commit_quietly(self.consumer.committable_positions())

    def _callback(
        self, callback: GroupCallback | None, partitions: Iterable[TopicPartition]
    ) -> None:
        if callback is not None:
            callback(sorted(partitions))

    def initial_position(self, tp: TopicPartition) -> Offset | None:
        """The committed offset of ``tp`` (read once per assignment change), or None."""
        if self._committed is None:
            deadline = time.monotonic() + self.config.request_timeout_ms / 1000
            while True:
                try:
                    self._committed = self.client.committed(self.group_id)
                    break
                except _WAIT_OUT:
                    # A restarting coordinator, or one whose Redis or brokers are briefly away
                    # (50311, 50302): wait for it rather than guess a position.
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(RETRY_BACKOFF_S)
        return self._committed.get(tp)

    # -- commits ------------------------------------------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None, asynchronous: bool
    ) -> Future[None] | None:
        """Commit ``offsets`` (default: the positions of every assigned partition)."""
        if self.membership is None:
            raise RuntimeError("commit() needs subscribe() first")
        chosen = dict(self.consumer.committable_positions() if offsets is None else offsets)
        if not asynchronous:
            self.membership.commit(chosen)
            return None
        if self._async_commits is None:
            self._async_commits = ThreadPoolExecutor(1, thread_name_prefix="headwater-commit")
        return self._async_commits.submit(self.membership.commit, chosen)

    def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets or self.membership is None:
            return
        try:
            self.membership.commit(offsets)
        except HeadwaterError as exc:
            log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    def close(self) -> None:
        """Commit (with ``enable.auto.commit``), revoke, leave the group."""
        if self.membership is not None:
            current = set(self.consumer.assignment())
            if self.config.enable_auto_commit:
                self._commit_quietly(self.consumer.committable_positions())
            if self._async_commits is not None:
                self._async_commits.shutdown(wait=True)
            if current:
                self._callback(self.on_revoke, current)
            self.membership.leave()
        self.client.close()
