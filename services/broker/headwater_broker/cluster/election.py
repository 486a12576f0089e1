"""Partition decisions, pure: leader election, ISR cleanup, reassignment steps, ISR proposals.

Every function takes a partition's state and the brokers' states and returns the next partition
state (or None when nothing changes); the controller turns the result into a compare-and-set
write. Rules (docs/cluster.md, "The controller"):

- only **active** brokers lead or stay in an in-sync set; an ineligible broker leaves every ISR
  unless that would empty it (so the last in-sync replicas are still known when they return);
- a leader that is no longer eligible is replaced by the first replica, in replica order, that is
  in the ISR and active (**clean**); with none, and every ISR member fenced, by the first active
  replica if the topic allows ``unclean.leader.election.enable`` (the ISR becomes that replica
  alone and the state records ``unclean``); otherwise the partition has no leader (-1);
- an eligible leader keeps leading unless the **preferred** replica (the first) is active and in
  the ISR, which then takes leadership back;
- a **reassignment** completes once every target replica is in the ISR: the replica list becomes
  the targets, the removed replicas leave the ISR, and a leader outside the targets is replaced;
- a leader that heartbeats but that **every other in-sync replica -- at least two -- reports
  unreachable** (it had no answer to its fetches for ``BROKER_REPLICA_FETCH_TIMEOUT_MS``) is cut
  off from its followers: it cannot commit a write, so it leaves the ISR and another in-sync
  replica leads (clean). One reporter could be the broken side itself (a follower cut off from
  its leader: the leader drops it from the ISR), so a single follower's word is not enough;
- each leader change bumps the leader epoch; any change bumps the partition epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from headwater.errors import (
    FencedLeaderEpochError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    StalePartitionEpochError,
    UnknownLeaderEpochError,
)
from headwater.types import BrokerId
from headwater_broker.cluster.state import (
    NO_LEADER,
    BrokerEpoch,
    BrokerState,
    BrokerStateName,
    LeaderEpoch,
    PartitionEpoch,
    PartitionState,
)

Brokers = Mapping[BrokerId, BrokerState]
Reports = Mapping[BrokerId, frozenset[BrokerId]]
"""Per broker, the leaders it reports it cannot fetch from (its current incarnation's report)."""
NO_REPORTS: Reports = {}


def eligible(brokers: Brokers, broker_id: BrokerId) -> bool:
    broker = brokers.get(broker_id)
    return broker is not None and broker.active


@dataclass(frozen=True)
class Election:
    leader: BrokerId
    unclean: bool


def elect_leader(
    replicas: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    current: BrokerId,
    brokers: Brokers,
    unclean_allowed: bool,
) -> Election:
    """Who leads next: keep a valid leader unless the preferred one can take over; else elect."""
    preferred = replicas[0] if replicas else NO_LEADER
    if preferred in isr and eligible(brokers, preferred):
        return Election(preferred, False)
    if current in replicas and current in isr and eligible(brokers, current):
        return Election(current, False)
    for b in replicas:
        if b in isr and eligible(brokers, b):
            return Election(b, False)
    # Unclean only when every in-sync replica is fenced: one shutting down still holds the data
    # and will be back, so its partitions wait for it rather than lose records.
    isr_alive = any(b in brokers and brokers[b].state is not BrokerStateName.FENCED for b in isr)
    if unclean_allowed and not isr_alive:
        for b in replicas:
            if eligible(brokers, b):
                return Election(b, True)
    return Election(NO_LEADER, False)


def cut_off_leader(p: PartitionState, brokers: Brokers, reports: Reports) -> bool:
    """Whether every other in-sync replica, at least two of them, active, reports the leader
    unreachable (see the module's rules)."""
    others = [b for b in p.isr if b != p.leader]
    if p.leader == NO_LEADER or len(others) < 2:
        return False
    return all(eligible(brokers, b) and p.leader in reports.get(b, ()) for b in others)


def reconcile(
    p: PartitionState, brokers: Brokers, unclean_allowed: bool, reports: Reports = NO_REPORTS
) -> PartitionState | None:
    """The partition's next state under the rules above, or None if it stays as it is."""
    cut_off = p.leader if cut_off_leader(p, brokers, reports) else NO_LEADER
    isr = tuple(b for b in p.isr if eligible(brokers, b) and b != cut_off) or p.isr
    replicas, adding, removing = p.replicas, p.adding, p.removing
    if p.reassigning and all(b in isr for b in p.target_replicas):
        replicas = p.target_replicas
        isr = tuple(b for b in isr if b in replicas)
        adding = removing = ()
    election = elect_leader(replicas, isr, p.leader, brokers, unclean_allowed)
    if election.unclean:
        isr = (election.leader,)
    leader_changed = election.leader != p.leader
    after = replace(
        p,
        replicas=replicas,
        isr=isr,
        leader=election.leader,
        adding=adding,
        removing=removing,
        leader_epoch=LeaderEpoch(p.leader_epoch + 1) if leader_changed else p.leader_epoch,
        unclean=election.unclean if leader_changed else p.unclean,
    )
    if after == p:
        return None
    return replace(after, partition_epoch=PartitionEpoch(p.partition_epoch + 1))


def start_reassignment(
    p: PartitionState, target: Sequence[BrokerId], brokers: Brokers
) -> PartitionState:
    """The partition with a reassignment to ``target`` under way (or cancelled, if ``target`` is
    where the replicas were before the one in progress)."""
    if not target:
        raise InvalidReplicaAssignmentError("A partition needs at least one replica")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"Replica list {list(target)} repeats a broker")
    unknown = [b for b in target if b not in brokers]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"Brokers {unknown} are not registered in this cluster (known: {sorted(brokers)})"
        )
    original = tuple(b for b in p.replicas if b not in p.adding)
    targets = tuple(BrokerId(b) for b in target)
    removing = tuple(b for b in original if b not in targets)
    adding = tuple(b for b in targets if b not in original)
    return replace(
        p,
        replicas=targets + removing,
        isr=tuple(b for b in p.isr if b in targets or b in removing),
        adding=adding,
        removing=removing,
        partition_epoch=PartitionEpoch(p.partition_epoch + 1),
    )


@dataclass(frozen=True)
class IsrMember:
    """A replica a leader proposes for the ISR, with the broker epoch it fetched under."""

    broker_id: BrokerId
    broker_epoch: BrokerEpoch


@dataclass(frozen=True)
class IsrProposal:
    """A leader's proposed in-sync set, made against the partition state it knows."""

    topic: str
    partition: int
    leader_id: BrokerId
    leader_epoch: LeaderEpoch
    partition_epoch: PartitionEpoch
    isr: tuple[IsrMember, ...]


def apply_isr_proposal(
    p: PartitionState, proposal: IsrProposal, brokers: Brokers
) -> PartitionState:
    """The partition with the proposed ISR, or the typed refusal of a stale or invalid proposal."""
    where = f"{p.topic}-{p.partition}"
    if proposal.leader_epoch < p.leader_epoch:
        raise FencedLeaderEpochError(
            f"{where}: leader epoch {proposal.leader_epoch} is older than {p.leader_epoch}"
        )
    if proposal.leader_epoch > p.leader_epoch:
        raise UnknownLeaderEpochError(
            f"{where}: leader epoch {proposal.leader_epoch} is newer than {p.leader_epoch}"
        )
    if proposal.leader_id != p.leader:
        leader = brokers.get(p.leader)
        raise NotLeaderOrFollowerError(
            f"{where}: broker {proposal.leader_id} is not the leader; broker {p.leader} is",
            leader_id=p.leader,
            leader_url=None if leader is None else leader.url,
            leader_epoch=p.leader_epoch,
        )
    if proposal.partition_epoch != p.partition_epoch:
        raise StalePartitionEpochError(
            f"{where}: the proposal was made at partition epoch {proposal.partition_epoch}; "
            f"the partition is at {p.partition_epoch}"
        )
    members = [m.broker_id for m in proposal.isr]
    if len(set(members)) != len(members):
        raise InvalidRequestError(f"{where}: proposed ISR {members} repeats a broker")
    if p.leader not in members:
        raise InvalidRequestError(f"{where}: proposed ISR {members} lacks the leader {p.leader}")
    outside = [b for b in members if b not in p.replicas]
    if outside:
        raise InvalidRequestError(f"{where}: brokers {outside} are not replicas of the partition")
    for m in proposal.isr:
        if m.broker_id in p.isr:
            continue  # staying members are not re-checked: a shrink must always be possible
        broker = brokers.get(m.broker_id)
        if broker is None or not broker.active:
            raise InvalidRequestError(
                f"{where}: broker {m.broker_id} is not active and cannot join the ISR"
            )
        if broker.epoch != m.broker_epoch:
            raise StaleBrokerEpochError(
                f"{where}: broker {m.broker_id} fetched at broker epoch {m.broker_epoch}; its "
                f"current epoch is {broker.epoch}"
            )
    isr = tuple(b for b in p.replicas if b in members)
    if isr == p.isr:
        return p
    return replace(p, isr=isr, partition_epoch=PartitionEpoch(p.partition_epoch + 1))
