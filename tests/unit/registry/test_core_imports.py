"""The registry's domain core loads without a web framework: FastAPI stays in app.py and api/."""

from __future__ import annotations

import subprocess
import sys

CORE = (
    "headwater_registry.cache",
    "headwater_registry.compatibility",
    "headwater_registry.config",
    "headwater_registry.documents",
    "headwater_registry.metrics",
    "headwater_registry.mode",
    "headwater_registry.names",
    "headwater_registry.registration",
    "headwater_registry.registry",
    "headwater_registry.schemas",
    "headwater_registry.settings",
    "headwater_registry.store.database",
    "headwater_registry.store.queries",
    "headwater_registry.store.tables",
    "headwater_registry.subjects",
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
