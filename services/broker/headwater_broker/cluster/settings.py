"""The cluster layer's settings: metadata store URL, timeouts and intervals, this broker's rack.

The broker reads them from ``BrokerSettings`` (the ``BROKER_`` names given beside each field,
docs/settings.md) with ``BrokerSettings.cluster_settings()``; tests and ``cluster.standalone``
build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterSettings:
    """Timeouts are in milliseconds; every default is justified in docs/cluster.md."""

    metadata_url: str  # BROKER_METADATA_URL: sqlite:///... or postgresql+psycopg://...
    session_timeout_ms: int = 1500  # BROKER_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = 250  # BROKER_HEARTBEAT_INTERVAL_MS
    controller_lease_ms: int = 2000  # BROKER_CONTROLLER_LEASE_MS
    metadata_poll_ms: int = 100  # BROKER_METADATA_POLL_MS
    rack: str | None = None  # BROKER_RACK
    replica_lag_time_max_ms: int = 10_000  # BROKER_REPLICA_LAG_TIME_MAX_MS
    change_retention_ms: int = 3_600_000  # BROKER_METADATA_CHANGE_RETENTION_MS
    producer_id_block_size: int = 1000  # ids a broker takes from the cluster counter at a time
    # A SQLite writer waits this long for another process's write transaction before failing.
    sqlite_busy_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        if not self.metadata_url:
            raise ValueError("metadata_url is required")
        for name in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "controller_lease_ms",
            "metadata_poll_ms",
            "replica_lag_time_max_ms",
            "change_retention_ms",
            "producer_id_block_size",
            "sqlite_busy_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        # A session must survive a few lost heartbeats, or one slow query fences a healthy broker.
        if self.heartbeat_interval_ms * 2 > self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be at most half of "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if self.rack == "":
            object.__setattr__(self, "rack", None)

    @property
    def lease_renewal_ms(self) -> int:
        """How often the controller renews its lease: three tries before it runs out."""
        return max(1, self.controller_lease_ms // 3)
