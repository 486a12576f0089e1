"""Where the CLI finds each service: its ``HEADWATER_*`` variable, default URL and flag, and
whether the service answering at a URL is the one a command expects.

``headwater up --port-offset`` prints the same variables (:func:`exports`), so what it tells a
user to export is exactly what every command reads; docs/settings.md lists them.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Service:
    """One service as the CLI reaches it."""

    name: str  # as its /healthz answers it: "broker", "schema registry", "coordinator"
    variable: str  # the environment variable holding its URL(s)
    default_port: int
    flag: str  # the command-line option overriding the variable
    several: bool  # whether a comma-separated list of URLs is accepted

    @property
    def default_url(self) -> str:
        return url_for(self.default_port)

    def url(self) -> str:
        """The URL(s) from the environment, else the default."""
        return os.environ.get(self.variable) or self.default_url

    def add_argument(self, parser: argparse.ArgumentParser) -> None:
        """The service's option (``--bootstrap-server``, ``--registry``, ``--coordinator``)."""
        urls = "URL(s), comma-separated" if self.several else "URL"
        parser.add_argument(
            self.flag,
            default=self.url(),
            metavar="URL",
            help=f"{self.name} {urls} (default: ${self.variable}, else {self.default_url})",
        )


BROKERS = Service("broker", "HEADWATER_BROKERS", 8082, "--bootstrap-server", several=True)
REGISTRY = Service("schema registry", "HEADWATER_REGISTRY_URL", 8081, "--registry", several=False)
COORDINATOR = Service("coordinator", "HEADWATER_COORDINATOR", 8090, "--coordinator", several=True)
SERVICES = (BROKERS, REGISTRY, COORDINATOR)


def url_for(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def exports(port_offset: int) -> dict[str, str]:
    """The variables that aim every command at ``headwater up --port-offset port_offset``."""
    return {s.variable: url_for(s.default_port + port_offset) for s in SERVICES}


@dataclass(frozen=True)
class Identity:
    """What a URL's /healthz says: the Headwater service and its pid ("" / None otherwise)."""

    service: str  # "" when something that is not a Headwater service answers
    pid: int | None = None

    def __str__(self) -> str:
        if not self.service:
            return "a program that is not a Headwater service"
        pid = f" (pid {self.pid})" if self.pid is not None else ""
        return f"a Headwater {self.service}{pid}"


def identify(url: str, timeout: float = 3.0) -> Identity | None:
    """Who answers ``GET url/healthz``; None when nothing answers."""
    try:
        answer = httpx.get(f"{url.rstrip('/')}/healthz", timeout=timeout)
    except httpx.HTTPError:
        return None
    try:
        body = answer.json()
    except ValueError:
        return Identity("")
    if answer.status_code != 200 or not isinstance(body, dict):
        return Identity("")
    name, pid = body.get("service"), body.get("pid")
    return Identity(name if isinstance(name, str) else "", pid if isinstance(pid, int) else None)


def misdirected(service: Service, urls: str) -> str | None:
    """Why ``urls`` do not reach ``service`` (another service, or not Headwater at all), or None
    when every one that answers is that service (or none answers: that is reported elsewhere)."""
    for url in (u.strip() for u in urls.split(",") if u.strip()):
        found = identify(url)
        if found is None or found.service == service.name:
            continue
        return (
            f"{url} is not a Headwater {service.name}: it is {found}. The {service.name} listens "
            f"on {service.default_url} by default; give {service.flag} or set ${service.variable}"
        )
    return None
