"""The broker's settings, read from ``BROKER_`` environment variables (docs/settings.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from headwater_broker.log.partition import FsyncPolicy
from headwater_kernel.settings import ServiceSettings


class BrokerSettings(ServiceSettings):
    """One broker's settings; ``port``, ``advertised_url`` and ``data_dir`` derive from ``id``."""

    model_config = SettingsConfigDict(env_prefix="BROKER_", extra="ignore")

    id: int = Field(default=0, ge=0)
    port: int = 0  # 0 = 8082 + id
    advertised_url: str = ""  # "" = http://127.0.0.1:PORT
    data_dir: str = ""  # "" = ./data/broker-ID
    fsync: FsyncPolicy = "interval"
    fsync_interval_ms: int = Field(default=1000, ge=1)
    max_request_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # Off only to measure what the check costs (bench/broker.py): a batch whose records do not
    # decode is then appended, and reading the partition from it fails.
    validate_records: bool = True
    retention_check_interval_ms: int = Field(default=300_000, ge=1)
    default_partitions: int = Field(default=1, ge=1)
    auto_create_topics: bool = False
    producer_id_expiration_ms: int = Field(default=86_400_000, ge=1)

    @model_validator(mode="after")
    def _derive_defaults(self) -> BrokerSettings:
        if self.port == 0:
            self.port = 8082 + self.id
        if not self.advertised_url:
            self.advertised_url = f"http://127.0.0.1:{self.port}"
        if not self.data_dir:
            self.data_dir = str(Path("data") / f"broker-{self.id}")
        return self

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)
