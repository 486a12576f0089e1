"""Consumer groups on the client side: the coordinator's API and the membership loop."""

from __future__ import annotations

from headwater.groups.client import CoordinatorClient, HeartbeatAnswer
from headwater.groups.membership import GroupMembership

__all__ = ["CoordinatorClient", "GroupMembership", "HeartbeatAnswer"]
