"""The registry's settings: ``REGISTRY_*`` environment variables (docs/settings.md)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from headwater_kernel.settings import ServiceSettings


class RegistrySettings(ServiceSettings):
    """Where the registry listens and keeps its state."""

    model_config = SettingsConfigDict(env_prefix="REGISTRY_", extra="ignore")

    port: int = 8081
    database_url: str = "sqlite:///./data/registry.db"
    default_compatibility: str = "BACKWARD"
