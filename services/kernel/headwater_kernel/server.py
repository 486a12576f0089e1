"""``serve``: run a service's app under uvicorn in the foreground, logging through logs.py."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from headwater_kernel import logs
from headwater_kernel.settings import ServiceSettings


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run an app in the foreground with uvicorn until SIGINT/SIGTERM, logging JSON lines."""
    prefix = str(settings.model_config.get("env_prefix") or "")
    logs.configure(settings.log_level, service=prefix.rstrip("_").lower() or app.title)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # None keeps the JSON handler configured above: uvicorn's loggers propagate to it.
        log_config=None,
        # RequestTelemetry writes the access line (with request id) at debug level.
        access_log=False,
        timeout_graceful_shutdown=5,
    )
