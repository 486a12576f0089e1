"""The fenced code blocks of README.md and docs/*.md, their docs-test marks, and their scripts.

How the docs are marked is written for authors in docs/doc-tests.md. In short: every shell or
Python block has, on the line just above its opening fence, one of

    <!-- docs-test: run -->            run it against a platform the test starts
    <!-- docs-test: serve -->          every command starts a service: wait for health, stop it
    <!-- docs-test: skip REASON -->    not run here (needs Docker, a cluster, ...): REASON says why

and in a shell block a line ``# => TEXT`` after some commands states what they print (stdout and
stderr together): TEXT must occur in it, compared without whitespace, ``...`` standing for
anything. ``# => exit N`` states the exit status of the last of them; every other command must
exit 0. This module only reads and rewrites text; tests/e2e/docs runs the blocks.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh"})
MARKED_LANGUAGES = SHELL_LANGUAGES | {"python"}
DEFAULT_PORTS = range(8081, 8091)  # registry 8081, broker N 8082+N, coordinator 8090

_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>\S*)\s*(?P<reason>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_EXPECT = re.compile(r"^\s*# => ?(?P<text>.*)$")
_EXIT = re.compile(r"^exit (?P<code>\d+)$")
_STEP_END = re.compile(r"<<docs-test step (?P<step>\d+) exit (?P<status>\d+)>>\n?")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(?P<word>\w+)\1")
_OPERATORS = frozenset({"|", "||", "&&", ";", "&", "|&", "(", ")", ";;"})


class Kind(enum.Enum):
    RUN = "run"
    SERVE = "serve"
    SKIP = "skip"


@dataclass(frozen=True)
class Mark:
    kind: Kind
    reason: str


@dataclass(frozen=True)
class Block:
    """One fenced block: where it opens, its language (first word of the info string), its text."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    mark: Mark | None
    mark_error: str | None = None

    @property
    def where(self) -> str:
        return (
            f"{self.path.relative_to(ROOT) if self.path.is_absolute() else self.path}:{self.line}"
        )

    @property
    def shell(self) -> bool:
        return self.language in SHELL_LANGUAGES


@dataclass(frozen=True)
class Step:
    """Commands of a shell block up to a ``# =>`` statement, and what that statement expects."""

    script: str
    expected: tuple[str, ...]
    exit_code: int
    line: int  # doc line of the step's last statement, or of the block's end


def doc_pages() -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def parse(path: Path) -> list[Block]:
    return parse_text(path.read_text(), path)


def parse_text(text: str, path: Path) -> list[Block]:
    """Every fenced block of a Markdown text, with the mark found on the line above it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        info = opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(_dedent(lines[j], indent))
            j += 1
        mark, error = _mark(lines[i - 1]) if i > 0 else (None, None)
        language = info.split()[0] if info else ""
        blocks.append(Block(path, i + 1, language, "\n".join(body) + "\n", mark, error))
        i = j + 1
    return blocks


def stray_marks(text: str) -> list[int]:
    """Lines (1-based) holding a docs-test mark that no fenced block follows directly."""
    lines = text.splitlines()
    return [
        n + 1
        for n, line in enumerate(lines)
        if "docs-test:" in line
        and line.lstrip().startswith("<!--")
        and (n + 1 >= len(lines) or _FENCE.match(lines[n + 1]) is None)
    ]


def problems(blocks: list[Block]) -> list[str]:
    """What is wrong with the marks of these blocks, one sentence each (empty when all is well)."""
    found: list[str] = []
    for b in blocks:
        if not b.language:
            found.append(f"{b.where}: a fenced block needs a language (```bash, ```text, ...)")
        elif b.mark_error is not None:
            found.append(f"{b.where}: {b.mark_error}")
        elif b.language in MARKED_LANGUAGES and b.mark is None:
            found.append(
                f"{b.where}: a {b.language} block needs a mark on the line above it: "
                "<!-- docs-test: run -->, <!-- docs-test: serve --> or "
                "<!-- docs-test: skip REASON --> (docs/doc-tests.md)"
            )
        elif b.language not in MARKED_LANGUAGES and b.mark is not None:
            found.append(f"{b.where}: only shell and python blocks are marked, not {b.language}")
        elif b.mark is not None and b.mark.kind is Kind.SERVE and not b.shell:
            found.append(f"{b.where}: serve is for shell blocks")
        elif b.mark is not None and b.mark.kind is Kind.RUN and b.shell:
            found.extend(f"{b.where}: {e}" for e in _statement_errors(b.text))
    return found


def _mark(line: str) -> tuple[Mark | None, str | None]:
    if "docs-test:" not in line:
        return None, None
    m = _MARK.match(line)
    if m is None:
        return None, f"malformed mark {line.strip()!r}"
    try:
        kind = Kind(m["kind"])
    except ValueError:
        return None, f"unknown mark {m['kind']!r}: run, serve or skip"
    if kind is Kind.SKIP and not m["reason"]:
        return None, "a skip mark says why: <!-- docs-test: skip REASON -->"
    if kind is not Kind.SKIP and m["reason"]:
        return None, f"{kind.value} takes no argument, got {m['reason']!r}"
    return Mark(kind, m["reason"]), None


def _dedent(line: str, indent: int) -> str:
    """A fenced block's content line without the opening fence's indentation (CommonMark)."""
    strip = len(line) - len(line.lstrip(" "))
    return line[min(strip, indent) :]


def _statement_errors(text: str) -> list[str]:
    errors = []
    for line in text.splitlines():
        m = _EXPECT.match(line)
        if m is not None and not m["text"].strip():
            errors.append("an empty '# =>' statement")
    return errors


# --- running shell blocks ----------------------------------------------------------------------


def steps(block: Block) -> list[Step]:
    """A shell block cut after each run of ``# =>`` lines; the rest is a last step of its own."""
    out: list[Step] = []
    script: list[str] = []
    expected: list[str] = []
    exit_code = 0
    lines = block.text.splitlines()
    for n, line in enumerate(lines):
        m = _EXPECT.match(line)
        if m is None:
            if expected or exit_code:
                out.append(Step("\n".join(script), tuple(expected), exit_code, block.line + n))
                script, expected, exit_code = [], [], 0
            script.append(line)
            continue
        text = m["text"].strip()
        code = _EXIT.match(text)
        if code is not None:
            exit_code = int(code["code"])
        else:
            expected.append(text)
    if script or expected or exit_code:
        out.append(Step("\n".join(script), tuple(expected), exit_code, block.line + len(lines)))
    return out


def shell_script(block_steps: list[Step]) -> str:
    """One bash script running every step, printing a marker with its status after each.

    Errors stop the script (errexit, pipefail) except in a step that states its exit status.
    curl fails on an HTTP error status (``--fail-with-body``), so a documented request that
    the service rejects fails its block instead of printing an error body nobody checks.
    """
    out = [
        "exec 2>&1",
        "set -e -o pipefail",
        'curl() { command curl --fail-with-body "$@"; }',
        "trap '__docs_s=$?; echo \"<<docs-test: exit $__docs_s from: $BASH_COMMAND>>\"' ERR",
    ]
    for n, step in enumerate(block_steps):
        if step.exit_code:
            out.append("set +e")
        out.append(step.script)
        # On a line of its own: curl's answers end without a newline.
        out.append(f"__docs_s=$?; set -e; printf '\\n<<docs-test step {n} exit %s>>\\n' $__docs_s")
    return "\n".join(out) + "\n"


def step_outputs(output: str) -> dict[int, tuple[int, str]]:
    """Each finished step's ``(exit status, output)``, read from the markers of shell_script."""
    found: dict[int, tuple[int, str]] = {}
    start = 0
    for m in _STEP_END.finditer(output):
        found[int(m["step"])] = (int(m["status"]), output[start : m.start()])
        start = m.end()
    return found


def matches(expected: str, output: str) -> bool:
    """Whether ``expected`` matches whole lines of ``output``, as doctest's ELLIPSIS would.

    ``...`` stands for anything (within a line or across lines); whitespace is ignored, and so
    are line breaks inside the match, so one expected line matches pretty-printed JSON too. The
    match starts at the start of a line and ends at the end of one: ``100`` does not match
    ``100003``.
    """
    lines = [re.sub(r"\s+", "", line) for line in output.splitlines()]
    text = "\x00" + "\x00".join(lines) + "\x00"  # \x00 marks line boundaries
    parts = [re.sub(r"\s+", "", part) for part in expected.split("...")]
    # Between two characters of a part a line may break (pretty-printed output); ... spans any.
    pattern = ".*?".join("\x00?".join(map(re.escape, part)) for part in parts)
    return re.search(f"\x00{pattern}\x00", text, re.DOTALL) is not None


def rewrite_ports(text: str, offset: int) -> str:
    """``127.0.0.1:8082`` / ``localhost:8082`` (default ports 8081-8090) moved by ``offset``."""

    def move(m: re.Match[str]) -> str:
        port = int(m["port"])
        return f"{m['host']}:{port + offset}" if port in DEFAULT_PORTS else m[0]

    return re.sub(r"\b(?P<host>127\.0\.0\.1|localhost):(?P<port>\d{4})\b", move, text)


# --- reading shell commands --------------------------------------------------------------------


def commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell block as argument lists, without leading assignments.

    Enough shell for documentation: backslash continuations, quotes across lines, here-document
    bodies (skipped), comments and the operators that separate commands.
    """
    for line in _logical_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            continue
        current: list[str] = []
        redirect_target = False
        for token in [*tokens, ";"]:
            if redirect_target:  # the file (or here-document word) of a redirection
                redirect_target = False
            elif token in _OPERATORS:
                words = _without_assignments(current)
                if words:
                    yield words
                current = []
            elif set(token) <= set("<>&|") and ("<" in token or ">" in token):
                if current and current[-1].isdigit():
                    current.pop()  # the descriptor of 2>&1
                redirect_target = True
            else:
                current.append(token)


def serve_commands(text: str) -> list[str]:
    """The commands of a serve block as written: one per logical line, comments kept."""
    return [
        line for line in _logical_lines(text) if line.strip() and not line.lstrip().startswith("#")
    ]


def _without_assignments(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    return words[i:]


def _logical_lines(text: str) -> Iterator[str]:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        while i < len(lines) and (line.endswith("\\") or not _balanced(line)):
            line = line[:-1] + " " + lines[i] if line.endswith("\\") else line + "\n" + lines[i]
            i += 1
        heredoc = _HEREDOC.search(line)
        if heredoc is not None:
            while i < len(lines) and lines[i].strip() != heredoc["word"]:
                i += 1
            i += 1
        yield line


def _balanced(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return False
    return True
