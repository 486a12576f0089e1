"""ServiceSettings: prefixed environment variables, and no web framework behind the import."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic_settings import SettingsConfigDict

from headwater_kernel.settings import ServiceSettings


class ExampleSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="EXAMPLE_", extra="ignore")

    widgets: int = 3


def test_defaults_serve_on_loopback() -> None:
    settings = ExampleSettings()
    assert (settings.host, settings.port, settings.log_level, settings.widgets) == (
        "127.0.0.1",
        0,
        "info",
        3,
    )


def test_every_setting_comes_from_the_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_HOST", "0.0.0.0")
    monkeypatch.setenv("EXAMPLE_PORT", "9999")
    monkeypatch.setenv("EXAMPLE_LOG_LEVEL", "debug")
    monkeypatch.setenv("EXAMPLE_WIDGETS", "7")
    monkeypatch.setenv("OTHER_PORT", "1")  # another service's variable is not ours
    settings = ExampleSettings()
    assert (settings.host, settings.port, settings.log_level, settings.widgets) == (
        "0.0.0.0",
        9999,
        "debug",
        7,
    )


def test_importing_settings_pulls_in_no_web_framework() -> None:
    # A fresh interpreter: this one has FastAPI loaded by other tests.
    probe = (
        "import sys, headwater_kernel.settings; "
        "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
