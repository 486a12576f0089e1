"""One consumer's membership in a group: the background heartbeat loop and its hand-off.

Threads: a daemon thread heartbeats the coordinator and records what it answers (member id,
epoch, the partitions the coordinator says this member owns now). The consumer's poll thread
takes that assignment (:meth:`GroupMembership.take_assignment`), applies it -- revoke callback,
commits, stops fetching -- and then reports what it owns (:meth:`report_owned`), which wakes the
heartbeat thread at once: that report is what lets the coordinator hand revoked partitions to
their next owner, so a partition is never fetched for the group by two live members.

Fencing (unknown member, fenced epoch) makes the loop count a *loss*: the poll thread drops every
partition without committing, and the loop rejoins with epoch 0. A fenced static instance id is
final (another process now runs as this instance): the loop stops and ``poll()`` raises it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import httpx

from headwater.errors import HeadwaterError, ServiceUnavailableError
from headwater.groups.client import CoordinatorClient
from headwater.groups.errors import (
    RETRIABLE,
    FencedInstanceIdError,
    FencedMemberEpochError,
    StaleMemberEpochError,
    UnknownMemberError,
)
from headwater.topic_partition import TopicPartition
from headwater.types import MemberEpoch

log = logging.getLogger("headwater.groups")

FENCING_ERRORS = (UnknownMemberError, FencedMemberEpochError)
# The coordinator (or its Redis, or every broker) does not answer for now: retried.
TRANSIENT: tuple[type[Exception], ...] = (httpx.TransportError, ServiceUnavailableError, *RETRIABLE)
RETRY_BACKOFF_S = 0.2


class AssignmentState(NamedTuple):
    """What the coordinator last said this member owns, and how often it was fenced so far."""

    partitions: frozenset[TopicPartition]
    losses: int


class GroupMembership:
    """Keeps one member in ``group_id`` subscribed to ``topics`` until :meth:`leave`."""

    def __init__(
        self,
        client: CoordinatorClient,
        group_id: str,
        topics: Iterable[str],
        *,
        instance_id: str | None = None,
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = frozenset(topics)
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.assignor = assignor
        self.member_id: str | None = None
        self.member_epoch = MemberEpoch(0)
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._owned: frozenset[TopicPartition] = frozenset()
        self._losses = 0
        self.fatal: HeadwaterError | None = None
        self._interval_s = 3.0  # until the coordinator tells its heartbeat interval
        self._heartbeats = 0
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"headwater-heartbeat-{self.group_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            delay = self.heartbeat_once()
            self._wake.wait(delay)
            self._wake.clear()

    def heartbeat_once(self) -> float:
        """Send one heartbeat; returns the seconds until the next one is due.

        When the member owns exactly what it was last told, the heartbeat long-polls (the
        coordinator holds it until the group changes, up to one interval), so a rebalance is
        heard at once; with a change still to apply it does not, so a release is never held.
        """
        with self._cond:
            member_id, epoch, owned = self.member_id, self.member_epoch, self._owned
            settled = member_id is not None and owned == self._assignment
        interval_s = self._interval_s
        started = time.monotonic()
        try:
            answer = self.client.heartbeat(
                self.group_id,
                member_id=member_id,
                member_epoch=epoch,
                topics=self.topics,
                owned=owned,
                instance_id=self.instance_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                assignor=self.assignor,
                wait_ms=int(interval_s * 1000) if settled else 0,
            )
        except FencedInstanceIdError as exc:
            # Another process runs with this static instance id; rejoining would fence it in
            # turn, forever. Stop, and let the consumer raise this on its next poll().
            log.error("group %s: %s", self.group_id, exc)
            with self._cond:
                self.fatal = exc
                self.member_id = None
                self._assignment = frozenset()
                self._losses += 1
                self._cond.notify_all()
            self._stop.set()
            return 0.0
        except FENCING_ERRORS as exc:
            if self._stop.is_set():
                return 0.0  # the answer to a heartbeat parked while this member left
            log.warning(
                "group %s: member %s lost its partitions: %s", self.group_id, member_id, exc
            )
            with self._cond:
                self.member_id = None
                self.member_epoch = MemberEpoch(0)
                self._assignment = frozenset()
                self._owned = frozenset()
                self._losses += 1
                self._cond.notify_all()
            return 0.0
        except (httpx.TransportError, HeadwaterError) as exc:
            log.warning("group %s: heartbeat failed, retrying: %s", self.group_id, exc)
            return RETRY_BACKOFF_S
        with self._cond:
            if self.member_id == member_id and self.member_epoch == epoch:
                self.member_id = answer.member_id
                self.member_epoch = answer.member_epoch
                self._assignment = answer.assignment
            self._heartbeats += 1
            self._interval_s = answer.heartbeat_interval_ms / 1000
            self._cond.notify_all()
        if answer.assignment != owned:
            return self._interval_s  # report_owned() wakes the loop once the change is applied
        return max(0.0, self._interval_s - (time.monotonic() - started))

    # -- the poll thread's side ---------------------------------------------------------------

    def take_assignment(self) -> AssignmentState:
        """The partitions this member should own now, and how many times it was fenced so far."""
        with self._cond:
            return AssignmentState(self._assignment, self._losses)

    def report_owned(self, owned: Iterable[TopicPartition]) -> None:
        """What the consumer owns after applying an assignment; released partitions go at once."""
        owned = frozenset(owned)
        with self._cond:
            changed = owned != self._owned
            self._owned = owned
        if changed:
            self._wake.set()

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Wait until the first answer arrives (or ``timeout_s``); True if there is one."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._heartbeats == 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float = 30.0) -> None:
        """Commit as the current member at its current epoch.

        A stale epoch (a heartbeat answer was in flight) is retried after the next heartbeat,
        for the partitions still owned; an unreachable or restarting coordinator is retried
        until ``timeout_s``; fencing errors propagate.
        """
        pending = dict(offsets)
        deadline = time.monotonic() + timeout_s
        stale = 0
        while pending:
            with self._cond:
                member_id, epoch, seen = self.member_id, self.member_epoch, self._heartbeats
            if member_id is None:
                raise UnknownMemberError(f"not a member of group {self.group_id} (yet)")
            try:
                self.client.commit(self.group_id, pending, member_id=member_id, member_epoch=epoch)
                return
            except StaleMemberEpochError:
                stale += 1
                if stale > 3:
                    raise
                self._wake.set()
                with self._cond:
                    until = time.monotonic() + 2.0
                    while self._heartbeats <= seen and time.monotonic() < until:
                        self._cond.wait(until - time.monotonic())
                    owned = self._assignment | self._owned
                pending = {tp: o for tp, o in pending.items() if tp in owned}
            except TRANSIENT:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(RETRY_BACKOFF_S)

    def leave(self) -> None:
        """Stop heartbeating and leave (a static member leaves with epoch -2, keeping its place
        for a session timeout)."""
        self._stop.set()
        self._wake.set()
        with self._cond:
            member_id = self.member_id
        if member_id is None:
            self._join_thread()
            return
        try:
            self.client.heartbeat(
                self.group_id,
                member_id=member_id,
                member_epoch=-2 if self.instance_id else -1,
                instance_id=self.instance_id,
            )
        except (httpx.TransportError, HeadwaterError) as exc:
            log.warning("group %s: leave failed (the session will expire): %s", self.group_id, exc)
        # The loop may be parked in a long-poll; leaving changes the group, which answers it.
        self._join_thread()
        with self._cond:
            self.member_id = None
            self._assignment = frozenset()

    def _join_thread(self) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._interval_s + 10)
