"""The consumer-group state machine: membership, epochs, target assignment and reconciliation.

Pure domain logic over one group's state; ``headwater_coordinator.store.groups`` loads it from
Redis, applies a batch of operations and writes it back atomically, so no coordinator process
keeps any of it.

Epochs (after Kafka's KIP-848):

- the **group epoch** grows whenever membership, a subscription or the partition count of a
  subscribed topic changes; the assignor then computes a new **target** at that epoch at once;
- a **member epoch** is the group epoch the member has reconciled to. A member whose target
  dropped partitions first *revokes* them (they stay in ``revoking``, still owned, until the
  member reports it no longer owns them, or it is expired); only then does its epoch advance and
  it may receive new partitions -- and only partitions no other member owns.

Invariant (checked by tests): the sets ``assigned | revoking`` of the members are pairwise
disjoint, at every step, so no partition ever has two live owners.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.groups.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    UnknownMemberError,
)
from headwater.topic_partition import PartitionKey
from headwater.types import GroupEpoch, MemberEpoch
from headwater_coordinator.assignor import ASSIGNORS, DEFAULT_ASSIGNOR, MemberSubscription
from headwater_coordinator.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Member,
)


@dataclass(frozen=True)
class HeartbeatRequest:
    """One member's heartbeat, already validated for shape and ranges."""

    member_id: str | None
    member_epoch: MemberEpoch
    instance_id: str | None
    topics: frozenset[str] | None
    owned: set[PartitionKey] | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignor: str | None


@dataclass(frozen=True)
class HeartbeatResult:
    member_id: str
    member_epoch: MemberEpoch
    assignment: set[PartitionKey]
    reconciling: bool


@dataclass
class GroupState:
    """One group: its epochs, assignor, last seen topic sizes and members.

    Operations mark what they change (``changed_members``, ``removed_members``) so the store
    writes only that.
    """

    group_id: str
    epoch: GroupEpoch = field(default_factory=lambda: GroupEpoch(0))
    assignment_epoch: GroupEpoch = field(default_factory=lambda: GroupEpoch(0))
    assignor: str = DEFAULT_ASSIGNOR
    topics: dict[str, int] = field(default_factory=dict)
    created_ms: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    exists: bool = False
    changed_members: set[str] = field(default_factory=set)
    removed_members: set[str] = field(default_factory=set)
    fenced_members: dict[str, int] = field(default_factory=dict)
    rebalances: int = 0
    released: bool = False
    transitioned: set[str] = field(default_factory=set)
    expired: list[str] = field(default_factory=list)
    loaded_epoch: GroupEpoch = field(default_factory=lambda: GroupEpoch(0))
    # Set by every change that calls for a new target. Several operations applied to one loaded
    # state (a batch, see the store) share one epoch bump, but each still needs the assignor.
    target_stale: bool = False
    observed: bool = False

    # --- storage shape -------------------------------------------------------------------------

    def meta_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor": self.assignor,
            "topics": self.topics,
            "created_ms": self.created_ms,
        }

    @classmethod
    def from_storage(
        cls, group_id: str, meta: Mapping[str, Any] | None, members: Iterable[Member]
    ) -> GroupState:
        state = cls(group_id=group_id)
        if meta is not None:
            state.exists = True
            state.epoch = GroupEpoch(meta["epoch"])
            state.assignment_epoch = GroupEpoch(meta["assignment_epoch"])
            state.assignor = meta["assignor"]
            state.topics = dict(meta["topics"])
            state.created_ms = meta["created_ms"]
            state.loaded_epoch = state.epoch
        state.members = {m.member_id: m for m in members}
        return state

    @property
    def others_may_care(self) -> bool:
        """Whether this operation changed what other members may be told (new target epoch,
        partitions released, members gone): parked heartbeats are woken for it."""
        return self.epoch != self.loaded_epoch or self.released or bool(self.removed_members)

    def members_to_wake(self) -> set[str]:
        """Members whose answer may differ now: their record changed, or they wait for
        partitions and some were freed. Waking only them keeps a rebalance of a large group
        from re-running every member's heartbeat for every release."""
        if not self.others_may_care:
            return set()
        waiting = {
            m.member_id for m in self.members.values() if not m.revoking and m.target - m.assigned
        }
        # A member moved to the new epoch with its partitions untouched has nothing to do; it
        # hears the epoch at its next heartbeat (its commits stay valid meanwhile).
        # Removed members are woken too: a parked heartbeat of a member that just left (or was
        # expired) should end now with its error, not at the end of its wait.
        alive = ((self.changed_members - self.transitioned) | waiting) & set(self.members)
        return alive | self.removed_members

    # --- views ---------------------------------------------------------------------------------

    @property
    def subscribed_topics(self) -> set[str]:
        return set().union(*(m.topics for m in self.members.values())) if self.members else set()

    @property
    def status(self) -> str:
        """``Empty``, ``Reconciling`` (some member has not reached its target) or ``Stable``."""
        if not self.members:
            return "Empty"
        for m in self.members.values():
            if m.revoking or m.assigned != m.target or int(m.epoch) != int(self.assignment_epoch):
                return "Reconciling"
        return "Stable"

    def owners(self) -> dict[PartitionKey, str]:
        out: dict[PartitionKey, str] = {}
        for m in self.members.values():
            for tp in m.owned:
                out[tp] = m.member_id
        return out

    # --- transitions ---------------------------------------------------------------------------

    def _bump(self) -> None:
        # One operation (a heartbeat, a sweep) moves the group at most one epoch forward, however
        # many things it changed.
        if self.epoch == self.loaded_epoch:
            self.epoch = GroupEpoch(self.loaded_epoch + 1)
        self.target_stale = True

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.changed_members.discard(member_id)
        self.removed_members.add(member_id)
        self._bump()

    def expire(self, now_ms: int) -> list[str]:
        """Remove members past their session (or revocation) deadline; their partitions free up."""
        gone = [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]
        for member_id in gone:
            self._remove(member_id)
        self.expired.extend(gone)
        return gone

    def rearm(self, after_ms: int, now_ms: int) -> list[str]:
        """Restart the clocks of members whose deadline fell in ``(after_ms, now_ms]``.

        That span is one in which no coordinator kept the expiry clock (none was running, or
        none reached Redis), so members could not heartbeat: as Kafka re-arms session timers
        when a coordinator loads a group, each such member gets its own full session (and, if
        revoking, its rebalance timeout) from ``now_ms``. Deadlines outside the span stand.
        """
        rearmed = []
        for member in self.members.values():
            session = after_ms < member.session_deadline_ms <= now_ms
            revoke = after_ms < member.revoke_deadline_ms <= now_ms
            if session:
                member.last_heartbeat_ms = now_ms
            if revoke:
                member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
            if session or revoke:
                self.changed_members.add(member.member_id)
                rearmed.append(member.member_id)
        return rearmed

    def refresh_topics(self, sizes: Mapping[str, int]) -> None:
        """Record the partition counts of subscribed topics; a change starts a new epoch."""
        wanted = self.subscribed_topics
        current = {t: n for t, n in sizes.items() if t in wanted and n > 0}
        if current != self.topics:
            self.topics = current
            self._bump()

    def compute_target(self) -> None:
        """Run the assignor if the group changed since the target was computed."""
        if self.assignment_epoch == self.epoch and not self.target_stale:
            return
        self.target_stale = False
        subs = [
            MemberSubscription(m.member_id, m.topics, frozenset(m.target))
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        ]
        target = ASSIGNORS[self.assignor](subs, self.topics) if subs else {}
        for member_id, tps in target.items():
            member = self.members[member_id]
            new = set(tps)
            if member.target != new:
                member.target = new
                self.changed_members.add(member_id)
            elif not member.revoking and member.assigned == new:
                # Nothing moves for this member, so it is at the new epoch already and the
                # group can be stable without waiting for its next heartbeat.
                member.epoch = MemberEpoch(self.epoch)
                self.changed_members.add(member_id)
                self.transitioned.add(member_id)
        self.assignment_epoch = self.epoch
        self.rebalances += 1

    def reconcile(
        self,
        member: Member,
        owned: set[PartitionKey] | None,
        now_ms: int,
        known_epoch: MemberEpoch,
    ) -> None:
        """Move one member toward its target without ever creating a second owner.

        ``known_epoch`` is the epoch the member's request carried: the oldest one it may still
        send if this answer is lost.
        """
        before = member.to_json()
        if owned is not None and member.revoking - owned:
            member.revoking &= owned
            self.released = True
        # Partitions that left the target are revoked first; ones that came back are kept.
        back = member.revoking & member.target
        member.assigned |= back
        member.revoking -= back
        dropped = member.assigned - member.target
        if dropped:
            member.assigned -= dropped
            member.revoking |= dropped
            member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
        if not member.revoking:
            member.revoke_deadline_ms = 0
            if int(member.epoch) != int(self.assignment_epoch):
                member.epoch = MemberEpoch(self.assignment_epoch)
            missing = member.target - member.assigned
            if missing:
                owners = self.owners()
                for tp in sorted(missing):
                    if owners.get(tp) is None:
                        member.assigned.add(tp)
        if member.epoch != known_epoch:
            member.previous_epoch = known_epoch
        if member.to_json() != before:
            self.changed_members.add(member.member_id)

    def heartbeat(
        self,
        request: HeartbeatRequest,
        now_ms: int,
        sizes: Mapping[str, int],
        *,
        fenced: bool = False,
        expire: bool = True,
    ) -> HeartbeatResult:
        """One heartbeat: join (epoch 0), leave (-1 / -2), or heartbeat and reconcile.

        ``sizes`` are the partition counts of (at least) every topic subscribed to after this
        request; ``fenced`` says the request's member id was replaced by a static rejoin;
        ``expire=False`` leaves other members' deadlines alone (a coordinator's start-up grace).
        Raises the member's error without changing anything else.
        """
        admitted = self.admit(request, now_ms, fenced)
        if isinstance(admitted, HeartbeatResult):
            self.after_leave(admitted, now_ms, sizes, expire=expire)
            return admitted
        return self.settle(admitted, request, now_ms, sizes, expire=expire)

    def after_leave(
        self, left: HeartbeatResult, now_ms: int, sizes: Mapping[str, int], *, expire: bool = True
    ) -> None:
        """Settle the group after a leave (a static leave keeps everything as it is)."""
        if left.member_epoch == LEAVE_EPOCH:
            if expire:
                self.expire(now_ms)
            self.refresh_topics(sizes)
            self.compute_target()

    def admit(
        self, request: HeartbeatRequest, now_ms: int, fenced: bool = False
    ) -> Member | HeartbeatResult:
        """The membership half of a heartbeat: join, leave, or record a live member's request.

        Returns the member to :meth:`settle`, or the final answer of a leave. Admitting every
        request of a burst before settling any lets one assignor run serve all of them.
        """
        if not self.exists:
            self.exists = True
            self.created_ms = now_ms
            if request.assignor:
                self.assignor = request.assignor
        epoch = request.member_epoch
        if epoch == JOIN_EPOCH:
            member = self._join(request, now_ms)
        else:
            member = self._existing(request, fenced)
            if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(member, epoch, now_ms)
            if not member.previous_epoch <= epoch <= member.epoch:
                raise FencedMemberEpochError(
                    f"member {member.member_id} sent epoch {epoch}; its epoch is {member.epoch}"
                )
            member.last_heartbeat_ms = now_ms
            member.left_static = False
            if request.topics is not None and request.topics != member.topics:
                member.topics = request.topics
                self._bump()
            member.session_timeout_ms = request.session_timeout_ms
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            self.changed_members.add(member.member_id)
        return member

    def settle(
        self,
        member: Member,
        request: HeartbeatRequest,
        now_ms: int,
        sizes: Mapping[str, int],
        *,
        expire: bool = True,
    ) -> HeartbeatResult:
        """The assignment half: expire, refresh topics, compute the target, reconcile."""
        epoch = request.member_epoch
        if expire:
            self.expire(now_ms)
        if self.members.get(member.member_id) is not member:
            # Left, expired or was replaced by another request admitted in the same batch.
            if member.member_id in self.fenced_members:
                raise FencedInstanceIdError(
                    f"member {member.member_id} was replaced by a newer member with instance id "
                    f"{member.instance_id!r}"
                )
            raise UnknownMemberError(f"member {member.member_id} is not in group {self.group_id}")
        self.refresh_topics(sizes)
        self.compute_target()
        joined = epoch == JOIN_EPOCH
        self.reconcile(
            member, set() if joined else request.owned, now_ms, member.epoch if joined else epoch
        )
        return HeartbeatResult(
            member.member_id,
            member.epoch,
            set(member.assigned),
            reconciling=bool(member.revoking or member.assigned != member.target),
        )

    def _existing(self, request: HeartbeatRequest, fenced: bool) -> Member:
        member = self.members.get(request.member_id or "")
        if member is None:
            if fenced:
                raise FencedInstanceIdError(
                    f"member {request.member_id} was replaced by a newer member with instance id "
                    f"{request.instance_id!r}"
                )
            raise UnknownMemberError(f"member {request.member_id} is not in group {self.group_id}")
        return member

    def _join(self, request: HeartbeatRequest, now_ms: int) -> Member:
        topics = request.topics or frozenset()
        previous = None
        if request.instance_id is not None:
            previous = next(
                (m for m in self.members.values() if m.instance_id == request.instance_id), None
            )
        member_id = request.member_id or uuid.uuid4().hex
        if previous is not None and previous.member_id != member_id:
            # Static rejoin: the new member takes over the old one's place -- partitions, target
            # and epoch -- without a rebalance; the old id is fenced (a zombie with it gets 40903).
            del self.members[previous.member_id]
            self.removed_members.add(previous.member_id)
            self.fenced_members[previous.member_id] = previous.session_timeout_ms
            member = Member(
                member_id=member_id,
                instance_id=request.instance_id,
                epoch=previous.epoch,
                previous_epoch=previous.previous_epoch,
                topics=topics,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                joined_ms=now_ms,
                last_heartbeat_ms=now_ms,
                assigned=set(previous.assigned),
                revoking=set(previous.revoking),
                target=set(previous.target),
                revoke_deadline_ms=previous.revoke_deadline_ms,
            )
            if topics != previous.topics:
                self._bump()
        else:
            if member_id in self.members:
                # A fenced member rejoining under its old id has dropped all its partitions.
                self._remove(member_id)
                self.removed_members.discard(member_id)
            member = Member(
                member_id=member_id,
                instance_id=request.instance_id,
                epoch=MemberEpoch(0),
                previous_epoch=MemberEpoch(0),
                topics=topics,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                joined_ms=now_ms,
                last_heartbeat_ms=now_ms,
            )
            self._bump()
        self.members[member_id] = member
        self.changed_members.add(member_id)
        return member

    def _leave(self, member: Member, epoch: MemberEpoch, now_ms: int) -> HeartbeatResult:
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Keep its partitions for a session timeout, so it can come back without a rebalance.
            member.left_static = True
            member.last_heartbeat_ms = now_ms
            self.changed_members.add(member.member_id)
            return HeartbeatResult(member.member_id, STATIC_LEAVE_EPOCH, set(), False)
        self._remove(member.member_id)
        return HeartbeatResult(member.member_id, LEAVE_EPOCH, set(), False)
