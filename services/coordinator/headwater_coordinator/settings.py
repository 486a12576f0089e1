"""The coordinator's settings: ``COORDINATOR_*`` environment variables (docs/settings.md)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from headwater_kernel.settings import ServiceSettings


class CoordinatorSettings(ServiceSettings):
    """Every field is ``COORDINATOR_<NAME>``; the names are shared with compose and k8s."""

    model_config = SettingsConfigDict(env_prefix="COORDINATOR_", extra="ignore")

    port: int = 8090
    redis_url: str = ""
    key_prefix: str = "headwater:"
    data_dir: str = "./data/coordinator"
    brokers: str = "http://127.0.0.1:8082"
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    offsets_retention_ms: int = 604_800_000
    # How often the lag gauges are recomputed for every group; 0 turns them off.
    lag_metrics_interval_ms: int = 15_000
    # Not in the contract table: how often each process looks for expired members.
    sweep_interval_ms: int = 500

    @property
    def broker_urls(self) -> list[str]:
        return [b.strip() for b in self.brokers.split(",") if b.strip()]
