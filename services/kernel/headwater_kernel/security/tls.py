"""TLS for every service: the listener's certificate, who it trusts, and its own clients' context.

A service with ``<PREFIX>TLS_CERT_FILE`` and ``<PREFIX>TLS_KEY_FILE`` serves HTTPS only (uvicorn's
SSL settings). ``<PREFIX>TLS_CA_FILE`` is the CA bundle it trusts, both for the certificates
clients present (with ``<PREFIX>TLS_CLIENT_AUTH`` ``requested`` or ``required``: mutual TLS) and
for the servers its own clients call (a broker's peers and controller, the coordinator's brokers):
those verify the peer's certificate against it and present the service's own certificate, so
mutual TLS between services needs nothing more.
"""

from __future__ import annotations

import ssl
from typing import Any, Literal, Protocol

ClientAuth = Literal["none", "requested", "required"]

_CERT_REQS: dict[ClientAuth, ssl.VerifyMode] = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class TlsSettings(Protocol):
    tls_cert_file: str
    tls_key_file: str
    tls_ca_file: str
    tls_client_auth: ClientAuth


def check_tls_settings(settings: TlsSettings, prefix: str) -> None:
    """ValueError naming the variable when the TLS settings do not fit together."""
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise ValueError(
            f"{prefix}TLS_CERT_FILE and {prefix}TLS_KEY_FILE go together: set both or neither"
        )
    if settings.tls_client_auth != "none":
        if not settings.tls_cert_file:
            raise ValueError(f"{prefix}TLS_CLIENT_AUTH needs TLS on ({prefix}TLS_CERT_FILE)")
        if not settings.tls_ca_file:
            raise ValueError(
                f"{prefix}TLS_CLIENT_AUTH={settings.tls_client_auth} needs {prefix}TLS_CA_FILE, "
                "the CA that signs client certificates"
            )


def tls_enabled(settings: TlsSettings) -> bool:
    return bool(settings.tls_cert_file)


def uvicorn_ssl_options(settings: TlsSettings) -> dict[str, Any]:
    """uvicorn.Config's SSL arguments for this service ({} for plain HTTP)."""
    if not tls_enabled(settings):
        return {}
    options: dict[str, Any] = {
        "ssl_certfile": settings.tls_cert_file,
        "ssl_keyfile": settings.tls_key_file,
        "ssl_cert_reqs": _CERT_REQS[settings.tls_client_auth],
    }
    if settings.tls_ca_file:
        options["ssl_ca_certs"] = settings.tls_ca_file
    return options


def client_ssl_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context the service's own clients use: verifying servers against ``TLS_CA_FILE`` (the
    system's CAs when unset) and presenting the service's certificate when it has one."""
    context = ssl.create_default_context(cafile=settings.tls_ca_file or None)
    if settings.tls_cert_file:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    return context
