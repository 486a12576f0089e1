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
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from headwater.client.tls import client_ssl_context as sdk_client_context

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
    default CA bundle when unset) and presenting the service's certificate when it has one."""
    return client_context(settings.tls_ca_file, settings.tls_cert_file, settings.tls_key_file)


def client_context(ca_file: str, cert_file: str = "", key_file: str = "") -> ssl.SSLContext:
    """A client context verifying servers against ``ca_file`` (httpx's default bundle when
    empty) and presenting ``cert_file``/``key_file`` when given: the SDK's, made once per set of
    files."""
    return sdk_client_context(ca_file or None, cert_file or None, key_file or None)


def tls_files_in(env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(CA, certificate, key) files of a service's TLS settings in a process environment (any
    prefix); None when it has no certificate, so serves plain HTTP."""

    def ending(suffix: str) -> str:
        return next((v for k, v in env.items() if k.endswith(suffix) and v), "")

    cert = ending("_TLS_CERT_FILE")
    return (ending("_TLS_CA_FILE"), cert, ending("_TLS_KEY_FILE")) if cert else None
