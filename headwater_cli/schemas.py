"""``headwater schemas register|get|check|diff``: Avro schemas from the command line and CI.

``check`` compares ``.avsc`` files with what a subject already holds, either through a registry
(the subject's own compatibility level, exactly what registering would decide) or, with
``--against REV``, with the same files at a git revision -- no registry needed, so a pull request
can be checked before anything is registered. Files map to subjects by name: ``orders-value.avsc``
is subject ``orders-value`` (or give ``--subject`` for a single file).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from headwater.registry.client import SchemaRegistryClient
from headwater.registry.compatibility import Finding, Level, check
from headwater.registry.errors import InvalidSchemaError, RegistryError
from headwater.registry.schema import ParsedSchema, normalize, parse
from headwater_cli.endpoints import REGISTRY


@dataclass(frozen=True)
class SchemaFile:
    path: Path
    subject: str


def schema_files(paths: list[str], subject: str | None) -> list[SchemaFile]:
    """The files named (directories expanded to their ``*.avsc``), each with its subject."""
    found: list[Path] = []
    for p in map(Path, paths):
        found.extend(sorted(p.glob("*.avsc")) if p.is_dir() else [p])
    if subject is not None and len(found) != 1:
        raise SystemExit("headwater schemas: --subject needs exactly one file")
    return [SchemaFile(f, subject or f.stem) for f in found]


# --- check -------------------------------------------------------------------------------------


def run_check(args: argparse.Namespace) -> int:
    files = schema_files(args.paths, args.subject)
    if not files:
        print("headwater schemas check: no .avsc files found", file=sys.stderr)
        return 2
    failures = 0
    for item in files:
        try:
            lines = (
                _check_git(item, args.against, Level(args.level.upper()))
                if args.against
                else _check_with_registry(item, args)
            )
        except (RegistryError, OSError, httpx.HTTPError) as e:
            lines = [f"FAIL {item.subject} ({item.path}): {type(e).__name__}: {e}"]
        failures += lines[0].startswith("FAIL")
        print("\n".join(lines))
    total = len(files)
    print(f"\n{total - failures} of {total} schema(s) compatible")
    return 1 if failures else 0


def _check_registry(item: SchemaFile, registry: SchemaRegistryClient) -> list[str]:
    text = item.path.read_text()
    parse(text)  # a broken file is reported as such, before any request
    ok, messages = registry.test_compatibility(item.subject, text)
    level = registry.get_compatibility(item.subject)
    head = f"{item.subject} ({item.path}) against the registry at {level}"
    if ok:
        return [f"OK   {head}"]
    return [f"FAIL {head}", *(f"  - {line}" for line in readable(messages))]


# Confluent's verbose compatibility messages (Headwater's registry writes the same shape):
#   {errorType:'KIND', description:'...', additionalInfo:'...'[, oldSchemaVersion: N]}
# then, from Confluent's own registry, {oldSchemaVersion: N}, {oldSchema: '...'} and
# {validateFields: '...', compatibility: '...'} as separate messages.
_FINDING = re.compile(
    r"\{errorType:'(?P<kind>\w+)', description:'(?P<text>.*)', additionalInfo:'.*?'"
    r"(?:, oldSchemaVersion: (?P<version>\d+))?\}",
    re.DOTALL,
)
_OLD_VERSION = re.compile(r"\{oldSchemaVersion: (?P<version>\d+)\}")
_CONTEXT = re.compile(r"\{(oldSchema|validateFields|compatibility):")


def readable(messages: list[str]) -> list[str]:
    """A registry's verbose messages as ``schemas diff`` prints findings:
    ``KIND at /json/pointer: sentence (version N)``; other messages are kept as they are."""
    lines: list[str] = []
    pending: list[tuple[str, str]] = []  # findings waiting for their {oldSchemaVersion: N}

    def flush(version: str | None) -> None:
        suffix = f" (version {version})" if version else ""
        lines.extend(f"{head}: {text}{suffix}" for head, text in pending)
        pending.clear()

    for message in messages:
        finding = _FINDING.fullmatch(message.strip())
        old = _OLD_VERSION.fullmatch(message.strip())
        if finding is not None:
            text = finding["text"].replace("\\'", "'")
            where = re.search(r"at path '([^']*)'", text)
            head = finding["kind"] + (f" at {where[1]}" if where else "")
            if finding["version"]:  # Headwater's shape: the version is in the message itself
                flush(None)
                pending.append((head, text))
                flush(finding["version"])
            else:
                pending.append((head, text))
        elif old is not None:
            flush(old["version"])
        elif not _CONTEXT.match(message.strip()):
            flush(None)
            lines.append(message)
    flush(None)
    return lines


def _check_git(item: SchemaFile, rev: str, level: Level) -> list[str]:
    new = parse(item.path.read_text())
    old_text = git_show(rev, item.path)
    head = f"{item.subject} ({item.path}) against {rev} at {level.value}"
    if old_text is None:
        return [f"OK   {head}: new at this revision, nothing to be compatible with"]
    try:
        old = parse(old_text)
    except InvalidSchemaError as e:
        return [f"OK   {head}: the file at {rev} was not a valid schema ({e.message})"]
    findings = check(new, [(None, old)], level)
    if not findings:
        return [f"OK   {head}"]
    return [f"FAIL {head}", *(f"  - {line}" for line in describe(findings))]


def describe(findings: list[Finding]) -> Iterator[str]:
    for f in findings:
        inc = f.incompatibility
        names = ("new", "old") if f.new_is_reader else ("old", "new")
        yield f"{inc.kind.value} at {inc.location}: {inc.describe(*names)}"


def git_show(rev: str, path: Path) -> str | None:
    """The file's content at ``rev`` (None if it did not exist there)."""
    directory = path.resolve().parent
    result = subprocess.run(
        ["git", "show", f"{rev}:./{path.name}"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 0:
        return result.stdout
    known = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        cwd=directory,
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        raise OSError(f"git revision {rev!r} not found")
    return None


# --- register, get, diff -----------------------------------------------------------------------


def run_register(args: argparse.Namespace) -> int:
    files = schema_files(args.paths, args.subject)
    with _registry(args) as registry:
        return _register(files, registry, args)


def _register(
    files: list[SchemaFile], registry: SchemaRegistryClient, args: argparse.Namespace
) -> int:
    status = 0
    for item in files:
        try:
            schema_id = registry.register_schema(
                item.subject, item.path.read_text(), normalize=args.normalize
            )
            print(f"{item.subject}: id {schema_id} ({item.path})")
        except RegistryError as e:
            print(f"{item.subject}: {e.message} ({item.path})", file=sys.stderr)
            status = 1
        except httpx.HTTPError as e:
            print(f"headwater schemas register: {args.registry}: {e}", file=sys.stderr)
            return 2
    return status


def run_get(args: argparse.Namespace) -> int:
    if args.id is None and not args.subject:
        print("headwater schemas get: give a SUBJECT or --id", file=sys.stderr)
        return 2
    try:
        with _registry(args) as registry:
            if args.id is not None:
                text = registry.get_schema(args.id).schema_str
            else:
                text = registry.get_version(args.subject, args.version).schema_str
    except RegistryError as e:
        print(f"headwater schemas get: {e.message}", file=sys.stderr)
        return 1
    except httpx.HTTPError as e:
        print(f"headwater schemas get: {args.registry}: {e}", file=sys.stderr)
        return 2
    print(orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode())
    return 0


def run_diff(args: argparse.Namespace) -> int:
    try:
        old = _load(args.old, args)
        new = _load(args.new, args)
    except RegistryError as e:
        print(f"headwater schemas diff: {e.message}", file=sys.stderr)
        return 1
    except httpx.HTTPError as e:
        print(f"headwater schemas diff: {args.registry}: {e}", file=sys.stderr)
        return 2
    changes = list(structural_diff(normalize(old.tree), normalize(new.tree), ""))
    print("\n".join(changes) if changes else "no differences")
    back = check(new, [(None, old)], Level.BACKWARD)
    fwd = check(new, [(None, old)], Level.FORWARD)
    print(f"\nbackward (new reads old): {'compatible' if not back else 'INCOMPATIBLE'}")
    print("\n".join(f"  - {line}" for line in describe(back)) or "", end="\n" if back else "")
    print(f"forward (old reads new):  {'compatible' if not fwd else 'INCOMPATIBLE'}")
    print("\n".join(f"  - {line}" for line in describe(fwd)) or "", end="\n" if fwd else "")
    return 0


def _load(spec: str, args: argparse.Namespace) -> ParsedSchema:
    """A file path, or ``registry:SUBJECT[@VERSION]`` fetched from the registry."""
    if spec.startswith("registry:"):
        subject, _, version = spec.removeprefix("registry:").partition("@")
        with _registry(args) as registry:
            return parse(registry.get_version(subject, version or "latest").schema_str)
    return parse(Path(spec).read_text())


def structural_diff(old: Any, new: Any, at: str) -> Iterator[str]:
    """``+``/``-``/``~`` lines with JSON pointers; fields and symbols are matched by name."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            here = f"{at}/{key}"
            if key not in new:
                yield f"- {here}: {_short(old[key])}"
            elif key not in old:
                yield f"+ {here}: {_short(new[key])}"
            elif key == "fields":
                yield from _diff_fields(old[key], new[key], here)
            else:
                yield from structural_diff(old[key], new[key], here)
    elif isinstance(old, list) and isinstance(new, list) and not _named_list(old + new):
        removed = [x for x in old if x not in new]
        added = [x for x in new if x not in old]
        yield from (f"- {at}: {_short(x)}" for x in removed)
        yield from (f"+ {at}: {_short(x)}" for x in added)
    elif old != new:
        yield f"~ {at}: {_short(old)} -> {_short(new)}"


def _diff_fields(old: list[Any], new: list[Any], at: str) -> Iterator[str]:
    new_by_name = {f["name"]: f for f in new}
    old_names = {f["name"] for f in old}
    for f in old:
        if f["name"] not in new_by_name:
            yield f"- {at}/{f['name']}: {_short(f['type'])}"
        else:
            yield from structural_diff(f, new_by_name[f["name"]], f"{at}/{f['name']}")
    for f in new:
        if f["name"] not in old_names:
            default = f" = {_short(f['default'])}" if "default" in f else " (no default)"
            yield f"+ {at}/{f['name']}: {_short(f['type'])}{default}"


def _named_list(items: list[Any]) -> bool:
    return any(isinstance(x, dict) for x in items)


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def _check_with_registry(item: SchemaFile, args: argparse.Namespace) -> list[str]:
    with _registry(args) as registry:
        return _check_registry(item, registry)


def _registry(args: argparse.Namespace) -> SchemaRegistryClient:
    return SchemaRegistryClient(args.registry)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("schemas", help="register, fetch, check and diff Avro schemas")
    commands = parser.add_subparsers(
        dest="schemas_command", metavar="ACTION", required=True, help="what to do"
    )

    def common(p: argparse.ArgumentParser) -> None:
        REGISTRY.add_argument(p)

    p = commands.add_parser("register", help="register .avsc files (subject = file name)")
    p.add_argument("paths", nargs="+", help=".avsc files or directories of them")
    p.add_argument("--subject", help="subject for a single file (default: its name)")
    p.add_argument("--normalize", action="store_true", help="register the normal form")
    common(p)
    p.set_defaults(func=run_register)

    p = commands.add_parser("get", help="print a subject's version or a schema by id")
    p.add_argument("subject", nargs="?", help="subject name")
    p.add_argument("--version", default="latest", help="version number or latest")
    p.add_argument("--id", type=int, help="a global schema id instead of a subject")
    common(p)
    p.set_defaults(func=run_get)

    p = commands.add_parser(
        "check",
        help="check .avsc files for compatibility (registry, or --against a git revision)",
    )
    p.add_argument("paths", nargs="+", help=".avsc files or directories of them")
    p.add_argument("--subject", help="subject for a single file (default: its name)")
    p.add_argument("--against", metavar="REV", help="compare with the files at this git revision")
    p.add_argument(
        "--level",
        default="BACKWARD",
        choices=[lv.value for lv in Level],
        type=str.upper,
        help="level for --against (default BACKWARD; the registry uses the subject's own)",
    )
    common(p)
    p.set_defaults(func=run_check)

    p = commands.add_parser("diff", help="what changed between two schemas, and compatibility")
    p.add_argument("old", help="file path or registry:SUBJECT[@VERSION]")
    p.add_argument("new", help="file path or registry:SUBJECT[@VERSION]")
    common(p)
    p.set_defaults(func=run_diff)
