"""docker-compose.yml as the tests read it: YAML plus Compose's variable interpolation.

Interpolation follows the Compose specification for the forms the file uses: ``$$`` (a literal
``$``), ``$VAR``, ``${VAR}``, ``${VAR:-default}`` / ``${VAR-default}`` (default when unset or
empty / unset) and ``${VAR:?message}`` / ``${VAR?message}`` (required: fail with message).
tests/deploy/test_compose_config.py checks the result against ``docker-compose config``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\})"
)


class MissingVariableError(Exception):
    """A required variable (``${VAR:?message}``) has no value."""


def interpolate(text: str, env: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        if match["bare"]:
            return env.get(match["bare"], "")
        name, op, arg = match["name"], match["op"], match["arg"]
        value = env.get(name)
        missing = value is None or (value == "" and op is not None and op.startswith(":"))
        if op is None:
            return value or ""
        if op.endswith("-"):
            return arg if missing else str(value)
        if missing:
            raise MissingVariableError(f"{name}: {arg}")
        return str(value)

    return _VARIABLE.sub(substitute, text)


def resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    return node


def load(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The compose file with YAML anchors merged and every string interpolated from ``env``."""
    document: dict[str, Any] = resolve(yaml.safe_load(path.read_text()), env)
    return document


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment as a dict (Compose accepts a mapping or ``KEY=value`` items)."""
    declared = service.get("environment", {})
    if isinstance(declared, list):
        return dict(item.split("=", 1) for item in declared)
    return {key: "" if value is None else str(value) for key, value in declared.items()}
