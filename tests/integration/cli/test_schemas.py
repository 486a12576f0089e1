"""``headwater schemas check --against REV`` and ``diff`` on a real temporary git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from headwater_cli import main


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def avsc(*fields: dict[str, Any]) -> str:
    return orjson.dumps({"type": "record", "name": "Order", "fields": list(fields)}).decode()


ID = {"name": "id", "type": "long"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "ci@example.com")
    git(tmp_path, "config", "user.name", "ci")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "orders-value.avsc").write_text(avsc(ID))
    (schemas / "users-value.avsc").write_text(avsc(ID))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "schemas")
    return tmp_path


def test_compatible_change_passes(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schemas" / "orders-value.avsc"
    path.write_text(avsc(ID, {"name": "note", "type": "string", "default": ""}))
    assert main(["schemas", "check", str(path), "--against", "main"]) == 0
    out = capsys.readouterr().out
    assert f"OK   orders-value ({path}) against main at BACKWARD" in out
    assert "1 of 1 schema(s) compatible" in out


def test_incompatible_change_fails_with_a_readable_report(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = repo / "schemas"
    (directory / "orders-value.avsc").write_text(avsc(ID, {"name": "note", "type": "string"}))
    (directory / "users-value.avsc").write_text(avsc({"name": "id", "type": "int"}))
    (directory / "new-value.avsc").write_text(avsc(ID))
    assert main(["schemas", "check", str(directory), "--against", "HEAD"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[
        0
    ] == f"OK   new-value ({directory / 'new-value.avsc'}) against HEAD at BACKWARD: " + (
        "new at this revision, nothing to be compatible with"
    )
    assert (
        out[1] == f"FAIL orders-value ({directory / 'orders-value.avsc'}) against HEAD at BACKWARD"
    )
    assert out[2] == (
        "  - READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1: The field 'note' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema"
    )
    assert out[3] == f"FAIL users-value ({directory / 'users-value.avsc'}) against HEAD at BACKWARD"
    assert out[4] == (
        "  - TYPE_MISMATCH at /fields/0/type: The type at path '/fields/0/type' in the new schema "
        "does not match the old's (reader type: INT not compatible with writer type: LONG)"
    )
    assert out[-1] == "1 of 3 schema(s) compatible"


def test_level_flag_and_forward_direction(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schemas" / "orders-value.avsc"
    path.write_text(avsc())  # dropping id: new reads old, old cannot read new
    assert main(["schemas", "check", str(path), "--against", "main"]) == 0
    assert main(["schemas", "check", str(path), "--against", "main", "--level", "full"]) == 1
    assert "FAIL orders-value" in capsys.readouterr().out


def test_invalid_file_and_unknown_revision_fail(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "schemas" / "orders-value.avsc"
    path.write_text('{"type": "record", "name": "Order", "fields": [{"name": "x"}]}')
    assert main(["schemas", "check", str(path), "--against", "main"]) == 1
    assert "FAIL orders-value" in capsys.readouterr().out
    good = repo / "schemas" / "users-value.avsc"
    assert main(["schemas", "check", str(good), "--against", "no-such-rev"]) == 1
    assert "git revision 'no-such-rev' not found" in capsys.readouterr().out


def test_diff_shows_changes_and_both_directions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.avsc", tmp_path / "new.avsc"
    old.write_text(avsc(ID, {"name": "gone", "type": "int"}))
    new.write_text(avsc({"name": "id", "type": "double"}, {"name": "n", "type": "int"}))
    assert main(["schemas", "diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        '~ /fields/id/type: "long" -> "double"',
        '- /fields/gone: "int"',
        '+ /fields/n: "int" (no default)',
    ]
    assert "backward (new reads old): INCOMPATIBLE" in out
    assert "forward (old reads new):  INCOMPATIBLE" in out
