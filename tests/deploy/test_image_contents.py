"""The image's build stage, replayed without Docker: what it copies, installs and ships.

The Dockerfile's COPY set must build a wheel holding every module the containers run, and its
dependency step must list exactly pyproject's dependencies. No Docker engine runs here, so the build
stage's two RUN steps are replayed with this interpreter on a copy of exactly the files the
Dockerfile copies.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def build_stage_copies() -> list[str]:
    """Source paths of the build stage's COPY instructions (not ``--from=`` copies)."""
    build = DOCKERFILE.split(" AS build\n", 1)[1].split("\nFROM ", 1)[0]
    sources: list[str] = []
    for line in build.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.extend(line.split()[1:-1])
    return sources


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build context holding only what the build stage copies."""
    root = tmp_path_factory.mktemp("context")
    for source in build_stage_copies():
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, root / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / source)
    return root


def test_build_stage_copies_the_package_sources() -> None:
    assert build_stage_copies() == [
        "pyproject.toml",
        "README.md",
        "headwater",
        "headwater_cli",
        "services",
        "spark",
    ]


def test_dependency_step_lists_pyproject_dependencies(context: Path) -> None:
    [snippet] = re.findall(r"python -c '([^']+)'", DOCKERFILE)
    result = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=context,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["server"]
    assert result.stdout.splitlines() == declared


def test_wheel_from_the_copied_sources_holds_every_module(context: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", ".", "-w", str(tmp_path)],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0 and "No matching distribution found for setuptools" in result.stderr:
        pytest.skip("no package index reachable to fetch the build backend")
    assert result.returncode == 0, result.stderr[-2000:]
    [wheel] = tmp_path.glob("headwater-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # A wheel puts each import root at its top: services/broker/headwater_broker/x.py is
    # headwater_broker/x.py.
    roots = [context, *(context / "services").iterdir(), context / "spark"]
    sources = {
        str(path.relative_to(root))
        for root in roots
        for package in root.glob("headwater*")
        for path in package.rglob("*.py")
    }
    assert sources
    assert sources - names == set()
    for module in ("headwater_broker", "headwater_registry", "headwater_coordinator"):
        assert f"{module.replace('.', '/')}/__main__.py" in names
    assert "headwater_spark/validate.py" in names
