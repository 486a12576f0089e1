"""One broker's hold on the controller lease: campaign, renew, resign, and the local deadline.

The lease itself lives in the ``controller`` row and is judged on the database's clock
(``store.MetadataStore.campaign``/``renew``). Locally the holder also keeps a deadline on its own
monotonic clock, started *before* each successful renewal was sent: past it, the broker stops
acting as controller even if it cannot reach the database to learn whether someone else took
over. That deadline only makes a deposed controller stop sooner; it is not what keeps it from
writing (the epoch compare-and-set in every write is).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from headwater.errors import MetadataUnavailableError, StaleControllerEpochError
from headwater_broker.cluster.state import ChangeOffset, ControllerEpoch
from headwater_broker.cluster.store import MetadataStore


@dataclass(frozen=True)
class Lease:
    """A won election: the epoch to write with, the change that recorded it, and until when
    (this process's monotonic clock) the holder may act without another renewal."""

    epoch: ControllerEpoch
    election_offset: ChangeOffset
    deadline: float
    renewed_at: float


class ControllerLease:
    """Campaigns for, renews and gives up the controller lease for one broker."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        lease_ms: int,
        renewal_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.lease_ms = lease_ms
        self.renewal_ms = renewal_ms
        self.clock = clock
        self.held: Lease | None = None

    def valid(self) -> bool:
        """Held, and this process's deadline has not passed."""
        return self.held is not None and self.clock() < self.held.deadline

    def renewal_due(self) -> bool:
        return (
            self.held is not None and self.clock() - self.held.renewed_at >= self.renewal_ms / 1000
        )

    async def campaign(self) -> Lease | None:
        """Take the lease if it has expired; the new epoch is one more than any before."""
        started = self.clock()
        election = await self.store.call(self.store.campaign, self.broker_id, self.lease_ms)
        if election is None:
            return None
        self.held = Lease(
            election.epoch, election.offset, started + self.lease_ms / 1000, renewed_at=started
        )
        return self.held

    async def renew(self) -> bool:
        """Extend the lease. False (and the lease dropped) when another controller was elected;
        ``MetadataUnavailableError`` when the database did not answer (the lease is kept until
        its local deadline)."""
        held = self.held
        if held is None:
            return False
        started = self.clock()
        try:
            renewed = await self.store.call(
                self.store.renew, self.broker_id, held.epoch, self.lease_ms
            )
        except MetadataUnavailableError:
            if not self.valid():
                self.held = None
            raise
        if not renewed:
            self.held = None
            return False
        if self.held is held:
            self.held = replace(held, deadline=started + self.lease_ms / 1000, renewed_at=started)
        return True

    async def resign(self) -> None:
        """Give the lease up now (clean shutdown) so another broker need not wait it out."""
        held, self.held = self.held, None
        if held is None:
            return
        # Already replaced, or unreachable: the lease then simply runs out.
        with contextlib.suppress(StaleControllerEpochError, MetadataUnavailableError):
            await self.store.call(self.store.resign, self.broker_id, held.epoch)

    def drop(self) -> None:
        self.held = None
