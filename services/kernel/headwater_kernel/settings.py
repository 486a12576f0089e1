"""``ServiceSettings``: what every service is configured with, from prefixed environment variables.

pydantic-settings only, no web framework: a service's domain core reads its settings without
importing FastAPI or Starlette.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Settings every service has; subclasses set ``env_prefix`` (``BROKER_``, ``REGISTRY_``)."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    log_level: str = "info"
