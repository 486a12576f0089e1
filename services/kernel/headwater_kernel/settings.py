"""``ServiceSettings``: what every service is configured with, from prefixed environment variables.

pydantic-settings only, no web framework: a service's domain core reads its settings without
importing FastAPI or Starlette.
"""

from __future__ import annotations

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from headwater_kernel.security.tls import ClientAuth, check_tls_settings


class ServiceSettings(BaseSettings):
    """Settings every service has; subclasses set ``env_prefix`` (``BROKER_``, ``REGISTRY_``)."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    log_level: str = "info"
    # TLS (headwater_kernel.security.tls): a certificate and key turn HTTPS on; the CA file is
    # what the service trusts (client certificates, and the servers its own clients call).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_ca_file: str = ""
    tls_client_auth: ClientAuth = "none"

    @model_validator(mode="after")
    def _check_tls(self) -> ServiceSettings:
        check_tls_settings(self, str(self.model_config.get("env_prefix") or ""))
        return self

    @property
    def scheme(self) -> str:
        """``https`` when the service serves TLS, else ``http``."""
        return "https" if self.tls_cert_file else "http"
