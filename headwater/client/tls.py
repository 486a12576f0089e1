"""One TLS context per process for the SDK's HTTP clients.

``httpx.Client()`` builds a new ``ssl.SSLContext`` each time, loading the CA bundle: 30 ms on an
idle machine and several times that under load, for every client, even one that only ever
talks plain HTTP. Spark tasks and short-lived tools build many clients; they share this one
context instead (the same settings httpx's default gives; SSLContext is safe to share).
"""

from __future__ import annotations

import functools
import ssl
import threading

import httpx

_lock = threading.Lock()
_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """httpx's default verifying context (CA bundle, ``SSL_CERT_FILE``/``SSL_CERT_DIR``),
    made once per process."""
    global _context
    with _lock:
        if _context is None:
            _context = httpx.create_ssl_context()
        return _context


@functools.lru_cache(maxsize=32)
def client_ssl_context(
    ca_location: str | None = None,
    certificate_location: str | None = None,
    key_location: str | None = None,
) -> ssl.SSLContext:
    """The context of clients configured with Kafka's ``ssl.ca.location`` (the CA bundle that
    signs the servers' certificates; the system's when None) and, for mutual TLS,
    ``ssl.certificate.location`` and ``ssl.key.location``; made once per distinct set."""
    if ca_location is None and certificate_location is None:
        return shared_ssl_context()
    context = ssl.create_default_context(cafile=ca_location)
    if certificate_location is not None:
        if key_location is None:
            raise ValueError("ssl.certificate.location needs ssl.key.location")
        context.load_cert_chain(certificate_location, key_location)
    return context
