"""The server kernel every service shares: app factory, errors, health, telemetry, settings.

One module per job, imported directly (nothing is re-exported here)::

    settings.py       ServiceSettings (pydantic-settings only: a domain core may import it)
    app.py            create_service_app: the FastAPI app with everything below wired in
    errors.py         error_response, install_error_handlers: errors as {"error_code", "message"}
    health.py         GET /healthz (with the service's name and pid), GET /readyz
    api_docs.py       GET /docs, GET /redoc with Swagger UI and ReDoc served from a package
    telemetry.py      request ids, per-route HTTP metrics, access lines, GET /metrics
    body.py           JSONBody, the orjson response class
    server.py         serve: run an app under uvicorn, HTTP only (Kafka clients get one log line)
    metrics.py        the HTTP metrics and their Prometheus exposition
    logs.py           JSON (or console) log lines carrying the request id
    local_service.py  a service as a local process (headwater up, tests, benchmarks)
    directory_lock.py one owner at a time for a data directory, and who that owner is
    sqlite.py         sqlite_engine: WAL, and BEGIN IMMEDIATE for writers (the services' stores)
    tasks.py          BackgroundTasks and cancel_and_wait: the one lifecycle of background work
"""
