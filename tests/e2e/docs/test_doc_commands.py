"""Every command of README.md and docs/ marked run or serve, executed against a real platform.

One ``headwater up`` process serves the module, on ports moved by a free offset; the commands'
``127.0.0.1:80xx`` / ``localhost:80xx`` URLs are moved by the same offset, and the CLI's
``HEADWATER_*`` variables point at it. Each page runs its blocks in order, from a fresh working
directory that looks like the repository root (its tracked top-level entries are linked in),
after every topic, subject and empty group of the pages before it was deleted: a page works
on a fresh ``make up``, as a reader would run it. The marks are explained in docs/doc-tests.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from tests.doc_blocks import (
    Block,
    Kind,
    doc_pages,
    matches,
    parse,
    rewrite_ports,
    serve_commands,
    shell_script,
    step_outputs,
    steps,
)
from tests.support import ROOT, free_port, port_offset_with_free_ports, unique

pytestmark = pytest.mark.e2e

BLOCK_TIMEOUT_S = 120  # the slowest documented command takes a few seconds
SERVE_TIMEOUT_S = 60
UP_TIMEOUT_S = 120
PAGES = [p for p in doc_pages() if any(b.mark and b.mark.kind is not Kind.SKIP for b in parse(p))]


@dataclass(frozen=True)
class Platform:
    """The services ``headwater up`` started, and how commands reach them."""

    offset: int
    log: Path

    def url(self, default_port: int) -> str:
        return f"http://127.0.0.1:{default_port + self.offset}"

    @property
    def broker(self) -> str:
        return self.url(8082)

    @property
    def registry(self) -> str:
        return self.url(8081)

    @property
    def coordinator(self) -> str:
        return self.url(8090)

    def env(self) -> dict[str, str]:
        """The environment of a documented command: the venv's bin on PATH, the CLI aimed here."""
        service_prefixes = ("BROKER_", "REGISTRY_", "COORDINATOR_", "HEADWATER_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(service_prefixes)}
        # What `source .venv/bin/activate` does for a reader: this interpreter's bin first.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"  # Python output stays in order with the step markers
        env["HEADWATER_BROKERS"] = self.broker
        env["HEADWATER_REGISTRY_URL"] = self.registry
        env["HEADWATER_COORDINATOR"] = self.coordinator
        for who in ("AUTHOR", "COMMITTER"):  # a reader's git has a user; a CI machine may not
            env[f"GIT_{who}_NAME"] = "Docs Test"
            env[f"GIT_{who}_EMAIL"] = "docs@example.test"
        return env

    def reset(self) -> None:
        """Delete every topic, subject (and its config) and empty group: a fresh platform."""
        with httpx.Client(timeout=30) as http:
            for topic in http.get(f"{self.broker}/topics").json():
                assert http.delete(f"{self.broker}/topics/{topic}").status_code == 204
            for subject in http.get(f"{self.registry}/subjects").json():
                path = f"{self.registry}/subjects/{subject}"
                assert http.delete(path).status_code == 200
                assert http.delete(path, params={"permanent": "true"}).status_code == 200
                assert http.delete(f"{self.registry}/config/{subject}").status_code in (200, 404)
            for group in http.get(f"{self.coordinator}/groups").json():
                # A group whose members have not left yet expires with them; pages use new names.
                http.delete(f"{self.coordinator}/groups/{group['group_id']}")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """``headwater up`` as a real process with its data in a temporary directory."""
    data = tmp_path_factory.mktemp("platform")
    offset = port_offset_with_free_ports()
    log = data / "up.log"
    env = Platform(offset, log).env()
    with open(log, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "headwater_cli", "up", "--port-offset", str(offset)],
            cwd=data,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its services are in its process group, for the last resort
        )
    try:
        deadline = time.monotonic() + UP_TIMEOUT_S
        while "Headwater is up" not in log.read_text(errors="replace"):
            assert up.poll() is None, f"headwater up exited:\n{_tail(log)}"
            assert time.monotonic() < deadline, f"headwater up is not up:\n{_tail(log)}"
            time.sleep(0.2)
        yield Platform(offset, log)
    finally:
        # SIGTERM stops every service as Ctrl-C does; SIGINT may be ignored in a background job.
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_documented_commands_run(page: Path, platform: Platform, tmp_path: Path) -> None:
    platform.reset()
    work = _repository_like(tmp_path / "work")
    for written in parse(page):
        if written.mark is None or written.mark.kind is Kind.SKIP:
            continue  # unmarked blocks fail tests/unit/docs; skipped ones are checked there too
        text = rewrite_ports(written.text, platform.offset)
        block = replace(written, text=text)
        if written.mark.kind is Kind.SERVE:
            _serve(block, platform, work, tmp_path)
        elif block.shell:
            _run_shell(block, platform, work, tmp_path)
        else:
            _run_python(block, platform, work, tmp_path)


def _run_shell(block: Block, platform: Platform, work: Path, tmp: Path) -> None:
    block_steps = steps(block)
    script = tmp / f"block-{block.line}.sh"
    script.write_text(shell_script(block_steps))
    result = _run(["bash", str(script)], block, platform, work)
    finished = step_outputs(result.stdout)
    for n, step in enumerate(block_steps):
        where = f"{block.where} (the commands up to line {step.line})"
        if n not in finished:
            pytest.fail(f"{where} failed (exit {result.returncode}):\n{result.stdout[-4000:]}")
        status, output = finished[n]
        assert status == step.exit_code, (
            f"{where}: exit {status}, expected {step.exit_code}:\n{output}"
        )
        for expected in step.expected:
            assert matches(expected, output), f"{where}: no {expected!r} in:\n{output[-4000:]}"
    assert result.returncode == 0, f"{block.where}: exit {result.returncode}:\n{result.stdout}"


def _run_python(block: Block, platform: Platform, work: Path, tmp: Path) -> None:
    script = tmp / f"block-{block.line}.py"
    script.write_text(block.text)
    result = _run([sys.executable, str(script)], block, platform, work)
    assert result.returncode == 0, f"{block.where}: exit {result.returncode}:\n{result.stdout}"


def _run(
    argv: list[str], block: Block, platform: Platform, work: Path
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            cwd=work,
            env=platform.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            start_new_session=True,  # a timeout kills the block's whole process group
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S} s:\n{output[-4000:]}")


def _serve(block: Block, platform: Platform, work: Path, tmp: Path) -> None:
    """Each command starts a service: it must answer /healthz, then stop on SIGTERM.

    The service's port variables point at a free port (the documented defaults are other
    runs' ports); everything else -- data directories, Redis, broker URLs -- is as written.
    """
    for n, command in enumerate(serve_commands(block.text)):
        port = free_port()
        env = platform.env()
        for prefix in ("BROKER", "REGISTRY", "COORDINATOR"):
            env[f"{prefix}_PORT"] = str(port)
        env["COORDINATOR_KEY_PREFIX"] = unique("docs") + ":"  # the machine's Redis is shared
        log = tmp / f"serve-{block.line}-{n}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=work,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_healthy(process, port, f"{block.where}: {command}", log)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_healthy(process: subprocess.Popen[bytes], port: int, what: str, log: Path) -> None:
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{what} exited {process.returncode}:\n{_tail(log)}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{what} did not answer /healthz in {SERVE_TIMEOUT_S} s:\n{_tail(log)}")


def _repository_like(work: Path) -> Path:
    """A working directory where the repository's tracked top-level entries resolve."""
    work.mkdir(parents=True)
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in sorted({path.split("/", 1)[0] for path in tracked}):
        (work / name).symlink_to(ROOT / name)
    return work


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else ""
