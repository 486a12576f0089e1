"""Where the coordinator's state lives in Redis: every key and channel, under one prefix.

The seam: the other store modules name keys only through :class:`Keyspace`, so this table is
the whole layout (``P`` is COORDINATOR_KEY_PREFIX)::

    P groups                 set    every group id that may exist (pruned lazily when listed)
    P deadlines              zset   "group\\0member" -> epoch ms when the member expires
    P swept                  string epoch ms of the last expiry sweep by any coordinator process
    P group:{g}              hash   "meta" -> JSON (epochs, assignor, topic sizes, created),
                                    "size" -> member count, "m:{member id}" -> member JSON
    P offsets:{g}            hash   "topic:partition" -> JSON {offset, metadata, commit_timestamp}
    P beats:{g}              hash   member id -> ms of its last fast-path heartbeat (liveness)
    P fenced:{g}:{member}    string a member id replaced by a static rejoin (expires)
    P changes                pub/sub "group\\nmember,member,..." when those members may have news

With no members, ``group:{g}`` and ``offsets:{g}`` carry a TTL of the offsets retention (Kafka's
offsets.retention.minutes after the group empties).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keyspace:
    """The key names of one coordinator deployment (one prefix in one Redis)."""

    prefix: str

    def group(self, group_id: str) -> str:
        return f"{self.prefix}group:{group_id}"

    def offsets(self, group_id: str) -> str:
        return f"{self.prefix}offsets:{group_id}"

    def beats(self, group_id: str) -> str:
        return f"{self.prefix}beats:{group_id}"

    def fenced(self, group_id: str, member_id: str) -> str:
        return f"{self.prefix}fenced:{group_id}:{member_id}"

    @property
    def groups(self) -> str:
        return f"{self.prefix}groups"

    @property
    def deadlines(self) -> str:
        return f"{self.prefix}deadlines"

    @property
    def swept(self) -> str:
        return f"{self.prefix}swept"

    @property
    def changes(self) -> str:
        return f"{self.prefix}changes"

    @staticmethod
    def deadline_entry(group_id: str, member_id: str) -> str:
        """A member's entry in the deadlines zset (the fast heartbeat script writes it too)."""
        return f"{group_id}\0{member_id}"
