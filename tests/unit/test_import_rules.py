"""The ``forbidden_outside`` import contract (tests/import_rules.py) on a small package of its own:
it catches direct and indirect imports from any module outside the allowed ones."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter.configuration import configure

from tests.import_rules import ForbiddenOutsideContract

SESSION = {"root_packages": ["toy"], "include_external_packages": True}


@pytest.fixture(autouse=True)
def importlinter_settings() -> None:
    """The timer and adapters import-linter's command line sets up before checking contracts."""
    configure()


def package(root: Path, modules: dict[str, str]) -> None:
    for name, source in modules.items():
        path = root.joinpath(*name.split("."))
        path.mkdir(parents=True, exist_ok=True)
        (path / "__init__.py").write_text(source)


def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, str]) -> list[str]:
    """The broken (source, forbidden) pairs of the contract over the toy package."""
    package(tmp_path, {"toy": "", **modules})
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("toy", include_external_packages=True, cache_dir=None)
    contract = ForbiddenOutsideContract(
        "cores",
        SESSION,
        {
            "containers": ["toy"],
            "allowed_modules": ["toy.app", "toy.api"],
            "forbidden_modules": ["fastapi"],
        },
    )
    result = contract.check(graph, verbose=False)
    broken = [
        f"{chains['downstream_module']} -> {chains['upstream_module']}"
        for chains in result.metadata["invalid_chains"]
    ]
    assert result.kept == (not broken)
    return broken


def test_allowed_modules_and_their_submodules_may_import_the_framework(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = {
        "toy.app": "import fastapi\nimport toy.core\n",
        "toy.api": "",
        "toy.api.routes": "from fastapi import APIRouter\n",
        "toy.core": "import json\n",
    }
    assert check(tmp_path, monkeypatch, modules) == []


def test_a_core_module_importing_it_directly_or_through_another_module_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = {
        "toy.app": "import fastapi\n",
        "toy.api": "",
        "toy.core": "import toy.store\n",
        "toy.store": "from fastapi import HTTPException\n",
        "toy.core_via_app": "def late():\n    import toy.app\n",
    }
    assert check(tmp_path, monkeypatch, modules) == [
        "toy.core -> fastapi",
        "toy.core_via_app -> fastapi",
        "toy.store -> fastapi",
    ]


def test_an_allowed_module_that_does_not_exist_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package(tmp_path, {"toy": "", "toy.app": ""})
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("toy", include_external_packages=True, cache_dir=None)
    contract = ForbiddenOutsideContract(
        "cores",
        SESSION,
        {"containers": ["toy"], "allowed_modules": ["toy.apps"], "forbidden_modules": ["fastapi"]},
    )
    with pytest.raises(ValueError, match=r"toy\.apps"):
        contract.check(graph, verbose=False)
