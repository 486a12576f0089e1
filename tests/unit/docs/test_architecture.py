"""docs/architecture.md names real code: every module, class, function and file it cites exists,
and every step of a walk written `A` -> `B` is a call: A's source calls (or names) B.

The page walks a record, a follower fetch, a heartbeat and a schema registration by name; when
code moves, this test names what the page still points at.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from functools import cache

import pytest

from tests.support import ROOT

PAGE = ROOT / "docs" / "architecture.md"
PACKAGE_DIRS = [
    ROOT / "headwater",
    ROOT / "headwater_cli",
    *sorted((ROOT / "services").glob("*/headwater_*")),
    ROOT / "spark" / "headwater_spark",
    ROOT / "spark" / "pyspark_headwater",
]
ROOTS = {path.name for path in PACKAGE_DIRS}
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
CAMEL = re.compile(r"_?[A-Z][a-z0-9]+[A-Za-z0-9]*")
# A bare name is taken for a class only with two humps or more: `Accept` is a header.
CLASS = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")


def inline_code(text: str) -> list[str]:
    """The page's inline code spans, outside fenced blocks, with a call's ``()`` dropped."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [span.removesuffix("()") for span in re.findall(r"`([^`\n]+)`", prose)]


@cache
def definitions() -> dict[str, list[str]]:
    """Every class and function defined in the packages -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for package in PACKAGE_DIRS:
        for path in sorted(package.rglob("*.py")):
            module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    found.setdefault(node.name, []).append(module)
    return found


def resolve(dotted: str) -> bool:
    """Import the longest module prefix of ``dotted``, then follow attributes to its end."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def member_exists(qualified: str) -> bool:
    """``Class.member``: some class of that name in the packages has that member."""
    class_name, member = qualified.split(".", 1)
    return any(resolve(f"{module}.{class_name}.{member}") for module in definitions()[class_name])


def problem(name: str) -> str | None:
    if name.endswith(".py") or name.endswith("/"):
        stem = name.rstrip("/")
        if (ROOT / stem).exists() or any(any(package.rglob(stem)) for package in PACKAGE_DIRS):
            return None
        return "no such file or folder in the packages"
    if DOTTED.fullmatch(name) and name.split(".")[0] in ROOTS:
        return None if resolve(name) else "does not import"
    if DOTTED.fullmatch(name) and CAMEL.fullmatch(name.split(".")[0]):
        if name.split(".")[0] not in definitions():
            return "no class of that name"
        return None if member_exists(name) else "the class has no such member"
    if CLASS.fullmatch(name):
        return None if name in definitions() else "no class of that name"
    return None


def find(name: str) -> object | None:
    """The function or class a cited name stands for (None: not a code object we can read)."""
    parts = name.split(".")
    if parts[0] in ROOTS:
        candidates = [name]
    elif CAMEL.fullmatch(parts[0]) and parts[0] in definitions():
        candidates = [f"{module}.{name}" for module in definitions()[parts[0]]]
    else:
        return None
    for candidate in candidates:
        pieces = candidate.split(".")
        for cut in range(len(pieces), 0, -1):
            try:
                target: object = importlib.import_module(".".join(pieces[:cut]))
            except ModuleNotFoundError:
                continue
            for attribute in pieces[cut:]:
                target = getattr(target, attribute, None)
            if inspect.isfunction(target) or inspect.ismethod(target):
                return target
            break
    return None


STEP = re.compile(r"`([^`\n]+)`\s*->\s*`([^`\n]+)`")


def steps() -> list[tuple[str, str]]:
    """Every ``A -> B`` of the page's prose, where A is a function of ours."""
    prose = re.sub(r"^```.*?^```", "", PAGE.read_text(), flags=re.S | re.M)
    pairs = [(a.removesuffix("()"), b.removesuffix("()")) for a, b in STEP.findall(prose)]
    return sorted({(a, b) for a, b in pairs if find(a) is not None})


def calls(caller: str, callee: str) -> bool:
    source = inspect.getsource(find(caller))  # type: ignore[arg-type]  # steps() found it
    return re.search(rf"\b{re.escape(callee.split('.')[-1])}\b", source) is not None


def cited() -> list[str]:
    return sorted(set(inline_code(PAGE.read_text())))


def test_the_page_cites_code_by_name() -> None:
    names = cited()
    assert sum(1 for n in names if n.split(".")[0] in ROOTS and "." in n) >= 40
    assert "headwater_broker.log.partition.PartitionLog.append" in names


@pytest.mark.parametrize("name", cited())
def test_every_cited_name_exists(name: str) -> None:
    assert problem(name) is None, f"docs/architecture.md cites `{name}`: {problem(name)}"


def test_the_walks_have_steps() -> None:
    assert len(steps()) >= 10
    assert ("ReplicaFetcher._run", "ReplicaFetcher._round") in steps()


@pytest.mark.parametrize(("caller", "callee"), steps())
def test_each_step_of_a_walk_calls_the_next(caller: str, callee: str) -> None:
    assert calls(caller, callee), f"docs/architecture.md: `{caller}` does not call `{callee}`"


def test_a_step_that_calls_nothing_is_caught() -> None:
    assert calls("ReplicaFetcher._round", "ReplicaFetcher._send")
    assert not calls("ReplicaFetcher._send", "ReplicaFetcher._round")


def test_a_name_that_moved_is_caught() -> None:
    assert problem("headwater.producer.Producer._run_sender") == "does not import"
    assert problem("Broker._decode_records") == "the class has no such member"
    assert problem("headwater.records.batch.iter_batches") is None
    assert problem("log/segment.py") is None
    assert problem("log/journal.py") == "no such file or folder in the packages"
