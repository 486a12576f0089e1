"""Each service fuzzed from its own OpenAPI document: no 5xx, nothing undocumented.

Schemathesis generates requests for every operation of a service's ``/openapi.json``, valid ones
(positive) and ones that break the document (negative), and sends them to the service running
as a real process on loopback. An answer fails the run when it is a server error, has a status
or a media type the operation does not document, a body or headers that break the documented
schema, or when a request the document forbids is accepted.

Not yet: sequences of calls along the broker's OpenAPI links (schemathesis's state machine) --
with derandomized generation it reported inconsistent data generation, and its sessions left
sockets open, so it was flaky under strict pytest.

Bounded: ``FUZZ_EXAMPLES`` examples per operation and mode (default 8; raise it locally to dig
deeper), generation derandomized so a run is repeatable, no shrinking. Each failure names its
operation and mode, with schemathesis's reproduction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import ServiceProcess, free_port

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "8"))
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def fuzz(url: str) -> list[str]:
    """Fuzz every operation of the service at ``url``; one line of report per failing one."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    failures = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            failures.append(f"an operation the fuzzer cannot read: {result.err()}")
            continue
        operation = result.ok()
        for mode in MODES:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],
            )
            def send(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(checks=CHECKS)

            try:
                send()
            except Unsatisfiable:
                pass  # negative mode, and nothing to break: no parameters, no body
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    return failures


def test_the_broker_holds_to_its_document(tmp_path: Path) -> None:
    port = free_port()
    env = {"BROKER_PORT": str(port), "BROKER_DATA_DIR": str(tmp_path), "BROKER_FSYNC": "never"}
    with ServiceProcess("headwater_broker", port, env, tmp_path / "broker.log") as broker:
        failures = fuzz(broker.url)
    assert not failures, "\n\n".join(failures)


def test_the_registry_holds_to_its_document(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "REGISTRY_PORT": str(port),
        "REGISTRY_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}",
    }
    with ServiceProcess("headwater_registry", port, env, tmp_path / "registry.log") as registry:
        failures = fuzz(registry.url)
    assert not failures, "\n\n".join(failures)


def test_the_coordinator_holds_to_its_document(
    broker: ServiceProcess, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    port = free_port()
    env = {
        "COORDINATOR_PORT": str(port),
        "COORDINATOR_BROKERS": broker.url,
        "COORDINATOR_REDIS_URL": redis_url,
        "COORDINATOR_KEY_PREFIX": redis_prefix,
    }
    with ServiceProcess("headwater_coordinator", port, env, tmp_path / "coord.log") as coordinator:
        failures = fuzz(coordinator.url)
    assert not failures, "\n\n".join(failures)
