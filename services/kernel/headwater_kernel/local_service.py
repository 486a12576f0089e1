"""Services as local processes: start ``python -m headwater_<name>``, wait for health, stop or kill.

``headwater up``, the demo, the benchmarks and the tests all run services this way, so a container's
command is exercised as a plain process everywhere.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Self

import httpx

from headwater.closeable import Closeable
from headwater_kernel.security.tls import client_context, tls_files_in

_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, and that no earlier call in
    this process returned.

    Taken below the kernel's ephemeral range where the system says what that is (Linux), so the
    port cannot be handed to some process's outgoing connection between this probe and the
    service's own bind -- with many clients connecting, that happened. Elsewhere the kernel picks
    one (port 0). A port is never returned twice: the kernel may offer a port again as soon as its
    probe socket closes, so two services set up one after the other could otherwise share it.
    """
    low, high = port_range()
    for _ in range(1000):
        candidate = random.randint(low, high) if high > low else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue  # in use: try another
            port: int = s.getsockname()[1]
        with _handed_out_lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("no free port left that was not handed out already")


def cluster_broker_env(
    broker_id: int, port: int, data_root: Path, metadata_url: str
) -> dict[str, str]:
    """The environment of broker ``broker_id`` of a local cluster: its port, its own data
    directory ``<data_root>/broker-<id>`` and the metadata database all brokers share.

    ``headwater up`` runs its brokers with it and the tests' cluster harness starts theirs with
    it, so a test's cluster is laid out as a user's is.
    """
    return {
        "BROKER_ID": str(broker_id),
        "BROKER_PORT": str(port),
        "BROKER_DATA_DIR": str(data_root / f"broker-{broker_id}"),
        "BROKER_METADATA_URL": metadata_url,
    }


PORT_RANGE_VARIABLE = "HEADWATER_PORT_RANGE"


def port_range() -> tuple[int, int]:
    """Where :func:`free_port` looks, both ends included: ``HEADWATER_PORT_RANGE`` ("low-high")
    when set -- parallel test workers each take a slice of their own, so two never probe the same
    port -- else 20000 up to the ephemeral range ((0, 0) when that is unknown: any port)."""
    configured = os.environ.get(PORT_RANGE_VARIABLE, "")
    low, _, high = configured.partition("-")
    if low.isdigit() and high.isdigit() and 0 < int(low) < int(high):
        return int(low), int(high)
    return _below_ephemeral()


def _below_ephemeral() -> tuple[int, int]:
    """Ports from 20000 up to the start of the ephemeral range, or (0, 0) when it is unknown."""
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0, 0
    return (20000, first - 1) if first > 21000 else (0, 0)


class ServiceProcess(Closeable, opens_with="start", closes_with="stop"):
    """A service started as a real process (``python -m <module>``) and stopped on exit.

    ``env`` adds to this process's environment. Output goes to ``log_path`` when given, to this
    process's own stdout with ``inherit_output``, else nowhere. ``pass_fds`` are descriptors the
    child inherits (a :class:`~headwater_kernel.directory_lock.DirectoryLock` it must hold too).
    ``start()`` waits until ``/healthz`` answers *from this child*: a port another process serves
    fails the start instead of passing for it. ``kill()`` sends SIGKILL (a crash); ``stop()``
    SIGTERM (a clean shutdown). A service given a TLS certificate in ``env`` (its
    ``..._TLS_CERT_FILE``) is reached over https, verified against its ``..._TLS_CA_FILE`` and
    presenting its own certificate, as its peers do.
    """

    def __init__(
        self,
        module: str,
        port: int,
        env: Mapping[str, str],
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
        *,
        inherit_output: bool = False,
        cwd: Path | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.module = module
        self.port = port
        self.env = dict(env)
        self.args = args
        self.log_path = log_path
        self.inherit_output = inherit_output
        self.cwd = cwd
        self.pass_fds = pass_fds
        self.process: subprocess.Popen[bytes] | None = None
        self._tls = tls_files_in(self.env)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def url(self) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """What a client of this service verifies it with and presents (None: plain HTTP)."""
        if self._tls is None:
            return None
        return client_context(*self._tls)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self, timeout: float = 60.0) -> Self:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        out: int | IO[bytes] | None = subprocess.DEVNULL
        log: IO[bytes] | None = None
        if self.inherit_output:
            out = None
        elif self.log_path:
            out = log = open(self.log_path, "ab")  # noqa: SIM115  # closed below, once the child has it
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                env=env,
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                pass_fds=self.pass_fds,
            )
        finally:
            # The child writes through its own copy of the descriptor; ours would only leak.
            if log is not None:
                log.close()
        verify = self.ssl_context() or True  # made once, not per health poll
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.module} exited with {self.process.returncode}{self._log_tail()}"
                )
            try:
                answer = httpx.get(f"{self.url}/healthz", timeout=1.0, verify=verify)
            except httpx.HTTPError:
                answer = None
            if answer is not None and answer.status_code == 200:
                pid = _serving_pid(answer)
                if pid == self.process.pid:
                    return self
                # Someone else answers on our port: our child cannot bind it and will exit.
                self.kill()
                who = f"process {pid}" if pid is not None else "another program"
                raise RuntimeError(f"port {self.port} is already served by {who}")
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.module} did not become healthy in {timeout}s{self._log_tail()}")

    def _log_tail(self) -> str:
        if self.log_path and self.log_path.exists():
            return "\n" + self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def _serving_pid(answer: httpx.Response) -> int | None:
    """The pid a Headwater ``/healthz`` answer names (None from anything else)."""
    try:
        body = answer.json()
    except ValueError:
        return None
    pid = body.get("pid") if isinstance(body, dict) else None
    return pid if isinstance(pid, int) else None
