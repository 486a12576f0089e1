"""CI wiring users copy (pre-commit hook, example workflow) run for real, and our own workflow.

The hook's entry and the workflow's command lines run as written in a throwaway git repository;
this repository's workflow is checked against what the test fixtures connect to.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater_cli import build_parser
from tests import conftest
from tests.support import ROOT

BIN = Path(sys.executable).parent
ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_COMPATIBLE = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}],
}
ORDER_BREAKING = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string"}]}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=30)


@pytest.fixture
def schema_repo(tmp_path: Path) -> Path:
    """A user's repository: schemas/orders-value.avsc committed on main (also as origin/main)."""
    repo = tmp_path / "repo"
    (repo / "schemas").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.test")
    git(repo, "config", "user.name", "CI")
    (repo / "schemas" / "orders-value.avsc").write_text(json.dumps(ORDER_V1))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "orders v1")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    return repo


def run_shell(command: str, repo: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )


def hook() -> dict[str, Any]:
    [definition] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(definition, dict)
    return definition


def test_pre_commit_hook_passes_compatible_and_blocks_breaking_changes(schema_repo: Path) -> None:
    definition = hook()
    assert definition["id"] == "headwater-schemas-check"
    assert definition["language"] == "python"
    assert definition["pass_filenames"] is True
    assert definition["files"] == r"\.avsc$"
    avsc = schema_repo / "schemas" / "orders-value.avsc"
    # pre-commit runs `entry` followed by the matching staged file names.
    command = f"{definition['entry']} {shlex.quote('schemas/orders-value.avsc')}"

    avsc.write_text(json.dumps(ORDER_COMPATIBLE))
    ok = run_shell(command, schema_repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK   orders-value" in ok.stdout

    avsc.write_text(json.dumps(ORDER_BREAKING))
    failed = run_shell(command, schema_repo)
    assert failed.returncode == 1
    assert "FAIL orders-value" in failed.stdout
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in failed.stdout


def workflow_runs(path: Path) -> dict[str, list[str]]:
    document = yaml.safe_load(path.read_text())
    return {
        name: [step["run"] for step in job["steps"] if "run" in step]
        for name, job in document["jobs"].items()
    }


def test_example_workflow_check_against_main_runs_as_written(schema_repo: Path) -> None:
    document = yaml.safe_load((ROOT / "examples" / "ci" / "schema-check.yml").read_text())
    # PyYAML reads the bare key `on` as True (YAML 1.1); GitHub reads it as "on".
    assert document[True]["pull_request"]["paths"] == ["schemas/**.avsc"]
    runs = workflow_runs(ROOT / "examples" / "ci" / "schema-check.yml")
    [check] = [run for run in runs["against-main"] if run.startswith("headwater schemas check")]
    assert check == "headwater schemas check schemas/ --against origin/main"
    checkout = document["jobs"]["against-main"]["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0

    (schema_repo / "schemas" / "orders-value.avsc").write_text(json.dumps(ORDER_COMPATIBLE))
    assert run_shell(check, schema_repo).returncode == 0
    (schema_repo / "schemas" / "orders-value.avsc").write_text(json.dumps(ORDER_BREAKING))
    failed = run_shell(check, schema_repo)
    assert failed.returncode == 1
    assert "against origin/main" in failed.stdout


def test_example_workflow_registry_check_parses_with_the_real_cli() -> None:
    runs = workflow_runs(ROOT / "examples" / "ci" / "schema-check.yml")
    [check] = [run for run in runs["against-registry"] if run.startswith("headwater schemas")]
    argv = shlex.split(check.replace("${{ vars.HEADWATER_REGISTRY_URL }}", "http://sr:8081"))
    args = build_parser().parse_args(argv[1:])
    assert args.registry == "http://sr:8081"
    assert args.paths == ["schemas/"]
    assert args.against is None


def test_repository_workflow_runs_make_test_with_the_services_tests_expect() -> None:
    document = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    job = document["jobs"]["test"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert "make test" in runs
    assert any("docker-compose" in run and "redis-server" in run for run in runs)
    services = job["services"]
    assert services["redis"]["ports"] == ["6379:6379"]
    assert services["postgres"]["ports"] == ["5432:5432"]
    # The fixtures connect to exactly these, as postgres without a password.
    assert conftest.REDIS_URL == "redis://127.0.0.1:6379/0"
    assert conftest.POSTGRES_ADMIN_URL.startswith("postgresql+psycopg://postgres@127.0.0.1:5432/")
    assert services["postgres"]["env"]["POSTGRES_HOST_AUTH_METHOD"] == "trust"
