"""The coordinator's domain core loads without a web framework: FastAPI stays in app.py and api/."""

from __future__ import annotations

import subprocess
import sys

CORE = (
    "headwater_coordinator.assignor",
    "headwater_coordinator.coordinator",
    "headwater_coordinator.group",
    "headwater_coordinator.lag_gauges",
    "headwater_coordinator.metadata",
    "headwater_coordinator.metrics",
    "headwater_coordinator.names",
    "headwater_coordinator.redis_server",
    "headwater_coordinator.settings",
    "headwater_coordinator.store.batch",
    "headwater_coordinator.store.changes",
    "headwater_coordinator.store.connection",
    "headwater_coordinator.store.groups",
    "headwater_coordinator.store.keyspace",
    "headwater_coordinator.store.liveness",
    "headwater_coordinator.store.offsets",
)


def test_core_modules_import_no_web_framework() -> None:
    # A fresh interpreter: this one has FastAPI loaded by other tests.
    probe = (
        f"import importlib, sys\n"
        f"for name in {CORE!r}: importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & "
        f"{{'fastapi', 'starlette', 'uvicorn'}}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
