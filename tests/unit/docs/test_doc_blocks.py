"""The docs' code blocks without running them: marks, syntax, CLI arguments, paths, settings.

tests/e2e/docs runs the blocks marked run and serve; these checks cover every block, skipped
ones included, in well under a second, so a new page cannot add an unmarked or broken command.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from headwater_broker.settings import BrokerSettings
from headwater_cli import build_parser
from headwater_coordinator.settings import CoordinatorSettings
from headwater_registry.settings import RegistrySettings
from tests.doc_blocks import (
    Block,
    Kind,
    Mark,
    commands,
    doc_pages,
    matches,
    parse,
    parse_text,
    problems,
    rewrite_ports,
    serve_commands,
    steps,
    stray_marks,
)
from tests.support import ROOT

PAGE = Path("page.md")


def all_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in parse(page)]


def shell_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.shell]


@cache
def tracked_top_level() -> frozenset[str]:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return frozenset(f.split("/", 1)[0] for f in files if "/" in f)


# --- the docs as they are -----------------------------------------------------------------------


def test_every_shell_and_python_block_is_marked() -> None:
    found = [p for page in doc_pages() for p in problems(parse(page))]
    for page in doc_pages():
        found += [
            f"{page.relative_to(ROOT)}:{n}: a mark with no fenced block under it"
            for n in stray_marks(page.read_text())
        ]
    assert found == []


def test_docs_run_commands() -> None:
    kinds = {b.mark.kind for b in all_blocks() if b.mark is not None}
    assert kinds == {Kind.RUN, Kind.SERVE, Kind.SKIP}  # the e2e test has something to run


@pytest.mark.parametrize("block", shell_blocks(), ids=lambda b: b.where)
def test_shell_block_is_valid_bash(block: Block) -> None:
    result = subprocess.run(
        ["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=10
    )
    assert result.returncode == 0, f"{block.where}: {result.stderr}"


def test_python_blocks_compile() -> None:
    for block in all_blocks():
        if block.language == "python":
            compile(block.text, block.where, "exec")


def test_documented_headwater_commands_parse() -> None:
    """Skipped blocks too: a renamed flag breaks `headwater validate` on a cluster as well."""
    failures = []
    for block in shell_blocks():
        for argv in commands(block.text):
            if argv[0] != "headwater":
                continue
            stderr = io.StringIO()
            try:
                with contextlib.redirect_stderr(stderr):
                    build_parser().parse_args(argv[1:])
            except SystemExit:
                failures.append(f"{block.where}: {' '.join(argv)}\n{stderr.getvalue()}")
    assert failures == []


def test_repository_paths_in_commands_exist() -> None:
    missing = []
    for block in shell_blocks():
        for argv in commands(block.text):
            for word in argv:
                path = word.split("=", 1)[-1] if word.startswith("-") else word
                in_repository = path.split("/", 1)[0] in tracked_top_level()
                if "/" in path and in_repository and not (ROOT / path).exists():
                    missing.append(f"{block.where}: {path}")
    assert missing == []


def test_documented_make_targets_exist() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    documented = {
        (block.where, argv[1])
        for block in shell_blocks()
        for argv in commands(block.text)
        if argv[0] == "make" and len(argv) > 1
    }
    assert {(where, target) for where, target in documented if target not in targets} == set()
    assert documented  # the README's two commands at least


SETTINGS: list[tuple[str, type[BaseSettings]]] = [
    ("BROKER_", BrokerSettings),
    ("REGISTRY_", RegistrySettings),
    ("COORDINATOR_", CoordinatorSettings),
]
# Defaults the table writes as a rule because the settings class derives them from BROKER_ID.
DERIVED = {"BROKER_PORT", "BROKER_ADVERTISED_URL", "BROKER_DATA_DIR", "BROKER_METADATA_URL"}


@pytest.mark.parametrize(("prefix", "settings"), SETTINGS, ids=[p for p, _ in SETTINGS])
def test_settings_page_lists_every_setting_with_its_default(
    prefix: str, settings: type[BaseSettings]
) -> None:
    rows = dict(
        re.findall(
            rf"^\| ({prefix}[A-Z_]+) \| ([^|]*?) \|", (ROOT / "docs/settings.md").read_text(), re.M
        )
    )
    fields = {prefix + name.upper(): field.default for name, field in settings.model_fields.items()}
    assert set(rows) == set(fields)
    for name, default in fields.items():
        if name in DERIVED:
            continue
        written = (
            "(empty)"
            if default == ""
            else str(default).lower()
            if isinstance(default, bool)
            else str(default)
        )
        assert rows[name] == written, name


# --- how blocks are read ------------------------------------------------------------------------


def test_a_mark_is_read_from_the_line_above_the_fence() -> None:
    text = (
        "intro\n<!-- docs-test: run -->\n```bash\necho hi\n```\n\n"
        "<!-- docs-test: skip needs Docker -->\n```sh\ndocker ps\n```\n"
        "<!-- docs-test: run -->\n\n```bash\nls\n```\n"
    )
    run, skip, unmarked = parse_text(text, PAGE)
    assert (run.line, run.language, run.text, run.mark) == (
        3,
        "bash",
        "echo hi\n",
        Mark(Kind.RUN, ""),
    )
    assert skip.mark == Mark(Kind.SKIP, "needs Docker")
    assert unmarked.mark is None  # a blank line between mark and fence does not count
    assert stray_marks(text) == [11]
    assert problems([unmarked]) == [
        "page.md:13: a bash block needs a mark on the line above it: <!-- docs-test: run -->, "
        "<!-- docs-test: serve --> or <!-- docs-test: skip REASON --> (docs/doc-tests.md)"
    ]


def test_bad_marks_are_problems() -> None:
    text = (
        "<!-- docs-test: skip -->\n```bash\nx\n```\n"
        "<!-- docs-test: walk -->\n```bash\nx\n```\n"
        "<!-- docs-test: run -->\n```yaml\na: 1\n```\n"
        "<!-- docs-test: serve -->\n```python\nx = 1\n```\n"
        "```\nno language\n```\n"
        "```text\nfine without a mark\n```\n"
    )
    assert problems(parse_text(text, PAGE)) == [
        "page.md:2: a skip mark says why: <!-- docs-test: skip REASON -->",
        "page.md:6: unknown mark 'walk': run, serve or skip",
        "page.md:10: only shell and python blocks are marked, not yaml",
        "page.md:14: serve is for shell blocks",
        "page.md:17: a fenced block needs a language (```bash, ```text, ...)",
    ]


def test_fences_keep_other_fences_and_indentation_inside() -> None:
    text = "- item\n  ~~~~bash\n  echo '```'\n    indented\n  ~~~~\n"
    [block] = parse_text(text, PAGE)
    assert (block.language, block.text) == ("bash", "echo '```'\n  indented\n")


def test_a_block_is_cut_into_steps_at_its_statements() -> None:
    text = (
        "<!-- docs-test: run -->\n```bash\nmake a\nmake b\n# => built a\n# => built b\n"
        "false\n# => exit 1\nmake c\n```\n"
    )
    [block] = parse_text(text, PAGE)
    assert [(s.script, s.expected, s.exit_code, s.line) for s in steps(block)] == [
        ("make a\nmake b", ("built a", "built b"), 0, 6),
        ("false", (), 1, 8),
        ("make c", (), 0, 9),
    ]


@pytest.mark.parametrize(
    ("expected", "output", "matched"),
    [
        ("100003", "Processed 100003 messages\n100003\n", True),
        ("100003", "Processed 100003 messages\n", False),  # whole lines only
        ("100", "100003\n", False),
        ('{"a": 1, ...}', '{"a":1,"b":2}', True),
        ('{"a": 2, ...}', '{"a":1,"b":2}', False),
        ("OK orders ...", "OK   orders (a.avsc) at BACKWARD\n\n1 of 1\n", True),
        ("... MISSING_DEFAULT ...", "FAIL x\n  - MISSING_DEFAULT at /f\n", True),
        ('{"type": "long"}', '{\n  "type": "long"\n}\n', True),  # pretty-printed
    ],
)
def test_expected_output_matches_whole_lines(expected: str, output: str, matched: bool) -> None:
    assert matches(expected, output) is matched


def test_default_ports_move_by_the_offset() -> None:
    text = "curl localhost:8082/x http://127.0.0.1:8090/g 127.0.0.1:6379 localhost:8091 :8081"
    assert rewrite_ports(text, 1000) == (
        "curl localhost:9082/x http://127.0.0.1:9090/g 127.0.0.1:6379 localhost:8091 :8081"
    )


def test_commands_are_read_as_the_shell_reads_them() -> None:
    text = (
        "A=1 headwater topics list | wc -l   # count\n"
        "curl -d '{\"a\":\n  1}' x && headwater produce t --key-separator : 2>&1\n"
        'cat > f.avsc <<\'EOF\'\n{"headwater": "not a command"}\nEOF\n'
        "python -m headwater_broker \\\n  --flag\n"
    )
    assert list(commands(text)) == [
        ["headwater", "topics", "list"],
        ["wc", "-l"],
        ["curl", "-d", '{"a":\n  1}', "x"],
        ["headwater", "produce", "t", "--key-separator", ":"],
        ["cat"],
        ["python", "-m", "headwater_broker", "--flag"],
    ]
    assert serve_commands(
        "# a comment\nBROKER_ID=1 python -m b  # port\n\npython -m c \\\n  -x\n"
    ) == [
        "BROKER_ID=1 python -m b  # port",
        "python -m c    -x",
    ]
