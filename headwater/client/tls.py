"""One TLS context per process for the SDK's HTTP clients.

``httpx.Client()`` builds a new ``ssl.SSLContext`` each time, loading the CA bundle: 30 ms on an
idle machine and several times that under load, for every client, even one that only ever
talks plain HTTP. Spark tasks and short-lived tools build many clients; they share this one
context instead (the same settings httpx's default gives; SSLContext is safe to share).
"""

from __future__ import annotations

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
