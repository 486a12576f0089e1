"""What a producer knows of the topics it writes: their partition counts.

Counts are fetched on a topic's first record and refreshed every ``metadata.max.age.ms`` by the
sender thread, so partitions added later are found. They come from the cluster client's topic
descriptions, so each refresh also renews the partitions' leaders.
"""

from __future__ import annotations

import logging
import time

from headwater.client.cluster import ClusterClient

log = logging.getLogger("headwater.producer")


class PartitionCounts:
    """Partition counts by topic. :attr:`known` is read without a call on the produce path;
    :meth:`fetch` asks a broker (and is the only writer)."""

    def __init__(self, servers: ClusterClient, max_age_ms: int) -> None:
        self._servers = servers
        self._max_age = max_age_ms / 1000
        self.known: dict[str, int] = {}
        self._fetched: dict[str, float] = {}

    def fetch(self, topic: str) -> int:
        """Fetch ``topic``'s partition count now (it may have grown since it was cached).

        Any broker of the cluster answers; the last connection error is raised if none does.
        """
        count = self._servers.partition_count(topic, fresh=True)
        self.known[topic] = count
        self._fetched[topic] = time.monotonic()
        return count

    def refresh_stale(self) -> None:
        """Refetch the counts older than ``metadata.max.age.ms``; on failure keep the known one
        (produce() still works) and try again after another max age."""
        now = time.monotonic()
        for topic, fetched in list(self._fetched.items()):
            if now - fetched >= self._max_age:
                try:
                    self.fetch(topic)
                except Exception as exc:
                    log.warning("metadata refresh for %r failed: %s", topic, exc)
                    self._fetched[topic] = now
