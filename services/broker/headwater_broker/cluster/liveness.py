"""Broker states, pure: what the controller records after reading the brokers' session rows.

For each session row, compared with the broker as the image records it:

- a **new registration** (a session epoch the image has not recorded) is recorded ``fenced``, with
  its URL, rack and incarnation, and ``fenced_change`` = the offset of that change;
- an ``active`` or ``shutting_down`` broker whose heartbeat is older than the session timeout
  (database clock) is **fenced** -- only when ``may_fence``: the controller has had one session
  timeout of unbroken contact with the database, so heartbeats missing because the database was
  away do not fence the whole cluster. A released session (clean shutdown) is fenced at once;
- a ``fenced`` broker is **unfenced** (``active``) once its heartbeat is fresh and the change it
  has applied has reached its ``fenced_change``: it knows it was fenced, and everything before.

The changes come first in the controller's transaction, so their offsets are ``next_offset``,
``next_offset + 1``, ... in the order returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.session import SessionRow
from headwater_broker.cluster.state import BrokerState, BrokerStateName, ChangeOffset


def broker_transitions(
    image: MetadataImage,
    sessions: Sequence[SessionRow],
    now_ms: int,
    session_timeout_ms: int,
    may_fence: bool,
    next_offset: int,
) -> list[BrokerState]:
    """The broker records to write, in offset order (empty when nothing changes)."""
    out: list[BrokerState] = []
    for s in sessions:
        offset = ChangeOffset(next_offset + len(out))
        recorded = image.brokers.get(s.broker_id)
        stale = s.released or now_ms - s.heartbeat_ms > session_timeout_ms
        if recorded is None or s.epoch > recorded.epoch:
            out.append(
                BrokerState(
                    broker_id=s.broker_id,
                    epoch=s.epoch,
                    incarnation=s.incarnation,
                    url=s.url,
                    rack=s.rack,
                    state=BrokerStateName.FENCED,
                    fenced_change=offset,
                )
            )
        elif s.epoch != recorded.epoch:
            continue  # an older session than recorded: cannot happen, epochs only grow
        elif recorded.state is not BrokerStateName.FENCED:
            if stale and (may_fence or s.released):
                out.append(replace(recorded, state=BrokerStateName.FENCED, fenced_change=offset))
        elif not stale and s.applied_change >= recorded.fenced_change:
            out.append(replace(recorded, state=BrokerStateName.ACTIVE))
    return out
