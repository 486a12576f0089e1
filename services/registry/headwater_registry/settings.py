"""The registry's settings: ``REGISTRY_*`` environment variables (docs/settings.md)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from headwater_kernel.settings import ServiceSettings
from headwater_registry.store.database import WRITE_ATTEMPTS


class RegistrySettings(ServiceSettings):
    """Where the registry listens and keeps its state."""

    model_config = SettingsConfigDict(env_prefix="REGISTRY_", extra="ignore")

    port: int = 8081
    database_url: str = "sqlite:///./data/registry.db"
    default_compatibility: str = "BACKWARD"
    # Attempts of a write transaction that conflicts (a concurrent writer, a busy SQLite file)
    # before it answers 50002.
    write_attempts: int = Field(default=WRITE_ATTEMPTS, ge=1)
