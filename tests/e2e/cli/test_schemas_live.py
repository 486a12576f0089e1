"""``headwater schemas register|check|get`` against a running registry process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from headwater_cli import main
from tests.support import ServiceProcess, free_port, unique

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("registry-cli")
    port = free_port()
    env = {"REGISTRY_PORT": str(port), "REGISTRY_DATABASE_URL": f"sqlite:///{data / 'r.db'}"}
    with ServiceProcess("headwater_registry", port, env, log_path=data / "registry.log") as proc:
        yield proc.url


def test_register_check_and_get(
    registry_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subject = unique("cli") + "-value"
    path = tmp_path / f"{subject}.avsc"
    fields: list[dict[str, str]] = [{"name": "a", "type": "int"}]
    path.write_text(orjson.dumps({"type": "record", "name": "C", "fields": fields}).decode())
    assert main(["schemas", "register", str(tmp_path), "--registry", registry_url]) == 0
    assert capsys.readouterr().out.startswith(f"{subject}: id ")

    fields = [*fields, {"name": "b", "type": "string"}]
    path.write_text(orjson.dumps({"type": "record", "name": "C", "fields": fields}).decode())
    assert main(["schemas", "check", str(path), "--registry", registry_url]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"FAIL {subject} ({path}) against the registry at BACKWARD"
    # As `schemas diff` prints a finding, not Confluent's {errorType:'...', ...} message.
    assert out[1:] == [
        "  - READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1: The field 'b' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema (version 1)",
        "",
        "0 of 1 schema(s) compatible",
    ]

    args = ["schemas", "check", str(path), "--subject", unique("other"), "--registry", registry_url]
    assert main(args) == 0  # a subject with no versions accepts anything
    capsys.readouterr()

    assert main(["schemas", "get", subject, "--registry", registry_url]) == 0
    first = {"type": "record", "name": "C", "fields": [{"name": "a", "type": "int"}]}
    assert orjson.loads(capsys.readouterr().out) == first


def test_get_unknown_subject_fails(registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schemas", "get", unique("nobody"), "--registry", registry_url]) == 1
    assert "not found" in capsys.readouterr().err


def test_unreachable_registry_is_reported_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x-value.avsc"
    path.write_text('"string"')
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert main(["schemas", "check", str(path), "--registry", nowhere]) == 1
    assert "FAIL x-value" in capsys.readouterr().out
    assert main(["schemas", "get", "x-value", "--registry", nowhere]) == 2
    assert nowhere in capsys.readouterr().err
