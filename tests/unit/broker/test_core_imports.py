"""The broker's domain core loads without a web framework: FastAPI stays in app.py and api/."""

from __future__ import annotations

import subprocess
import sys

CORE = (
    "headwater_broker.broker",
    "headwater_broker.log.index",
    "headwater_broker.log.leader_epoch",
    "headwater_broker.log.partition",
    "headwater_broker.log.producer_state",
    "headwater_broker.log.segment",
    "headwater_broker.metrics",
    "headwater_broker.producer_registry",
    "headwater_broker.replication.acks",
    "headwater_broker.replication.fetcher",
    "headwater_broker.replication.follower",
    "headwater_broker.replication.leader",
    "headwater_broker.replication.wire",
    "headwater_broker.settings",
    "headwater_broker.topic_config",
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
