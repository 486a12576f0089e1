"""The broker's settings, read from ``BROKER_`` environment variables (docs/settings.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.log.local_log import FsyncPolicy
from headwater_kernel.settings import ServiceSettings


class BrokerSettings(ServiceSettings):
    """One broker's settings; ``port``, ``advertised_url`` and ``data_dir`` derive from ``id``."""

    model_config = SettingsConfigDict(env_prefix="BROKER_", extra="ignore")

    id: int = Field(default=0, ge=0)
    port: int = 0  # 0 = 8082 + id
    advertised_url: str = ""  # "" = http://127.0.0.1:PORT (https:// with TLS on)
    data_dir: str = ""  # "" = ./data/broker-ID
    fsync: FsyncPolicy = "interval"
    fsync_interval_ms: int = Field(default=1000, ge=1)
    max_request_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # The most one compressed batch's records may decompress to (a topic whose max.message.bytes
    # is larger takes that): as large as the largest request body the broker already holds in
    # memory, so decompression at most doubles what one request costs.
    max_decompressed_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # Off only to measure what the check costs (bench/broker.py): a batch whose records do not
    # decode is then appended, and reading the partition from it fails.
    validate_records: bool = True
    # Off only to measure what the numpy check of records of varying layout saves: the same
    # batches are refused either way (services/broker/headwater_broker/validation/records.py).
    validate_columnar: bool = True
    retention_check_interval_ms: int = Field(default=300_000, ge=1)
    default_partitions: int = Field(default=1, ge=1)
    auto_create_topics: bool = False
    producer_id_expiration_ms: int = Field(default=86_400_000, ge=1)
    # How long a REST produce's Idempotency-Key is remembered after its last use (idempotency.py).
    idempotency_key_window_ms: int = Field(default=600_000, ge=1)
    # The cluster (docs/cluster.md, "Where it lives"): "" = sqlite:///<data dir>/cluster.db, so a
    # broker started alone is a one-broker cluster.
    metadata_url: str = ""
    session_timeout_ms: int = Field(default=1500, ge=1)
    heartbeat_interval_ms: int = Field(default=250, ge=1)
    controller_lease_ms: int = Field(default=2000, ge=1)
    metadata_poll_ms: int = Field(default=100, ge=1)
    # A broker whose metadata image has lacked a change already in the log for longer than this
    # stops acting as a leader (503 50302) until it catches up: leadership may have moved.
    metadata_max_lag_ms: int = Field(default=2000, ge=1)
    rack: str | None = None
    replica_lag_time_max_ms: int = Field(default=10_000, ge=1)
    # A follower that has had no answer from its leader for this long reports it unreachable;
    # a leader drops from the ISR a follower behind it that sent no fetch for twice this long.
    # Above the followers' long-poll wait (500 ms), which a healthy leader answers within.
    replica_fetch_timeout_ms: int = Field(default=1000, ge=600)
    # min.insync.replicas of topics that do not set it (capped at a partition's replica count).
    min_insync_replicas: int = Field(default=1, ge=1)
    metadata_change_retention_ms: int = Field(default=3_600_000, ge=1)
    # How long a request relayed to another broker (leader or controller) may take.
    forward_timeout_ms: int = Field(default=30_000, ge=1)
    # acks=all waits at most this long for the in-sync replicas (then 504 50401).
    request_timeout_ms: int = Field(default=30_000, ge=1)
    # How long start-up waits for the controller to record this broker active.
    startup_timeout_ms: int = Field(default=30_000, ge=1)
    # On SIGTERM, how long the broker waits for the controller to move its leaderships away.
    controlled_shutdown_timeout_ms: int = Field(default=10_000, ge=0)

    @model_validator(mode="after")
    def _derive_defaults(self) -> BrokerSettings:
        if not self.rack:
            self.rack = None  # BROKER_RACK="" (an unset variable passed on) means no rack
        if self.port == 0:
            self.port = 8082 + self.id
        if not self.advertised_url:
            self.advertised_url = f"{self.scheme}://127.0.0.1:{self.port}"
        if not self.data_dir:
            self.data_dir = str(Path("data") / f"broker-{self.id}")
        if not self.metadata_url:
            self.metadata_url = f"sqlite:///{Path(self.data_dir).resolve() / 'cluster.db'}"
        self.cluster_settings()  # refuse inconsistent timeouts at start, with the rule broken
        return self

    def cluster_settings(self) -> ClusterSettings:
        return ClusterSettings(
            metadata_url=self.metadata_url,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            controller_lease_ms=self.controller_lease_ms,
            metadata_poll_ms=self.metadata_poll_ms,
            rack=self.rack,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            change_retention_ms=self.metadata_change_retention_ms,
        )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)
