"""The coordinator's OpenAPI document tells the truth: every error a route sends is documented for
that operation, with the error schema and its code, and nothing is documented that it never sends.

Each error is produced for real -- a bad request, a fenced member, a topic that does not exist,
no broker answering, Redis not answering -- and its status and code are then looked up in the
document of the operation that answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from tests.integration.coordinator.client import beat, join, make_topic
from tests.openapi_document import check_document, documented_errors
from tests.support import ServiceProcess, free_port, unique

HEARTBEAT = ("post", "/groups/{group_id}/heartbeat")
COMMIT = ("post", "/groups/{group_id}/offsets")
OFFSETS = ("get", "/groups/{group_id}/offsets")
RESET = ("post", "/groups/{group_id}/offsets/reset")
LIST = ("get", "/groups")
DESCRIBE = ("get", "/groups/{group_id}")
LAG = ("get", "/groups/{group_id}/lag")
DELETE = ("delete", "/groups/{group_id}")
OPERATIONS = [HEARTBEAT, COMMIT, OFFSETS, RESET, LIST, DESCRIBE, LAG, DELETE]

Operation = tuple[str, str]


def settings(**overrides: Any) -> CoordinatorSettings:
    base: dict[str, Any] = {"lag_metrics_interval_ms": 0, "sweep_interval_ms": 100}
    return CoordinatorSettings(**(base | overrides))


@pytest.fixture
def redis_down(broker: ServiceProcess, redis_prefix: str) -> Iterator[TestClient]:
    """The app with nothing listening where its Redis should be."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    app = create_app(settings(redis_url=dead, key_prefix=redis_prefix, brokers=broker.url))
    with TestClient(app) as client:
        yield client


@pytest.fixture
def brokers_down(redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    """The app with nothing listening where its only broker should be."""
    dead = f"http://127.0.0.1:{free_port()}"
    app = create_app(settings(redis_url=redis_url, key_prefix=redis_prefix, brokers=dead))
    with TestClient(app) as client:
        yield client


class Observed:
    """Every error answer seen, per operation: (status, code)."""

    def __init__(self) -> None:
        self.errors: dict[Operation, set[tuple[int, int]]] = {op: set() for op in OPERATIONS}

    def send(
        self,
        client: TestClient,
        operation: Operation,
        group: str | None,
        expect: tuple[int, int],
        **request: Any,
    ) -> None:
        method, template = operation
        path = template if group is None else template.replace("{group_id}", group)
        response = client.request(method.upper(), path, **request)
        body = response.json()
        assert (response.status_code, body["error_code"]) == expect, (operation, body)
        assert set(body) == {"error_code", "message"}
        assert body["message"]
        assert response.headers["content-type"] == "application/json"
        if response.status_code == 503:
            assert response.headers["retry-after"] == "1"
        self.errors[operation].add(expect)


def documented(doc: dict[str, Any], operation: Operation) -> set[tuple[int, int]]:
    """(status, code) pairs the document lists for an operation's error responses."""
    method, path = operation
    for status, response in doc["paths"][path][method]["responses"].items():
        if status == "503":
            assert response["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    pairs = documented_errors(doc, method, path)
    assert all(str(code).startswith(str(status)) for status, code in pairs), (operation, pairs)
    return pairs


def test_every_error_sent_is_documented_for_its_operation(
    api: TestClient,
    redis_down: TestClient,
    brokers_down: TestClient,
    broker: ServiceProcess,
) -> None:
    topic = make_topic(broker, 2, records=10)
    seen = Observed()
    long_session = {"session_timeout_ms": 30_000}

    # A group with two members that own one partition each, and a static member replaced.
    group = unique("g")
    a = join(api, group, [topic], **long_session)
    b = join(api, group, [topic], **long_session)
    for _ in range(3):
        # With their 30 s sessions: a beat without it would leave them the app's 1 s default,
        # which a slow machine can outlast before the commits below (they were expired once).
        a = beat(api, group, a, **long_session)
        b = beat(api, group, b, **long_session)
    (mine,) = [p for e in a["assignment"] for p in e["partitions"]]
    (theirs,) = [p for e in b["assignment"] for p in e["partitions"]]
    instance = unique("i")
    old = join(api, group, [topic], instance_id=instance, **long_session)
    join(api, group, [topic], instance_id=instance, **long_session)  # fences `old`

    def commit(member: dict[str, Any] | None, t: str, partition: int, offset: int) -> Any:
        body: dict[str, Any] = {"offsets": [{"topic": t, "partition": partition, "offset": offset}]}
        if member is not None:
            body |= {"member_id": member["member_id"], "member_epoch": member["member_epoch"]}
        return body

    malformed = {"content": b"{", "headers": {"content-type": "application/json"}}
    empty = unique("empty")  # a group without members, with offsets
    assert api.post(f"/groups/{empty}/offsets", json=commit(None, topic, 0, 1)).status_code == 204
    missing, bad = unique("missing"), "bad id"

    # heartbeat
    send = seen.send
    send(api, HEARTBEAT, group, (400, 40002), **malformed)
    send(api, HEARTBEAT, group, (422, 42200), json={"member_epoch": "x"})
    send(api, HEARTBEAT, bad, (422, 42204), json={"member_epoch": 0, "topics": [topic]})
    join_body = {"member_epoch": 0, "topics": [topic]}
    send(api, HEARTBEAT, group, (422, 42202), json=join_body | {"session_timeout_ms": 50})
    send(api, HEARTBEAT, group, (422, 42203), json=join_body | {"assignor": "roundrobin"})
    send(api, HEARTBEAT, group, (422, 42206), json={"member_epoch": 0, "topics": ["../x"]})
    send(api, HEARTBEAT, group, (404, 40402), json={"member_id": "nobody", "member_epoch": 1})
    fenced = {"member_id": a["member_id"], "member_epoch": a["member_epoch"] + 7}
    send(api, HEARTBEAT, group, (409, 40901), json=fenced)
    replaced = {"member_id": old["member_id"], "member_epoch": old["member_epoch"]}
    send(api, HEARTBEAT, group, (409, 40903), json=replaced | {"instance_id": instance})
    send(redis_down, HEARTBEAT, group, (503, 50311), json=join_body)

    # commit
    send(api, COMMIT, group, (400, 40002), **malformed)
    send(api, COMMIT, group, (422, 42200), json=commit(a, topic, mine, 2**70))
    send(api, COMMIT, group, (422, 42201), json=commit(a, topic, mine, -1))
    send(api, COMMIT, bad, (422, 42204), json=commit(None, topic, 0, 0))
    send(api, COMMIT, group, (422, 42206), json=commit(a, "T?x=1", mine, 0))
    send(api, COMMIT, group, (404, 40402), json=commit({**a, "member_id": "zombie"}, topic, 0, 1))
    send(api, COMMIT, group, (404, 40403), json=commit(None, unique("ghost"), 0, 0))
    send(api, COMMIT, group, (409, 40901), json=commit({**a, "member_epoch": 99}, topic, mine, 1))
    send(api, COMMIT, group, (409, 40902), json=commit({**a, "member_epoch": 0}, topic, mine, 1))
    send(api, COMMIT, group, (409, 40903), json=commit(old, topic, mine, 1))
    send(api, COMMIT, group, (409, 40904), json=commit(None, topic, mine, 1))
    send(api, COMMIT, group, (409, 40905), json=commit(a, topic, theirs, 1))
    send(brokers_down, COMMIT, empty, (503, 50302), json=commit(None, topic, 0, 1))
    send(redis_down, COMMIT, empty, (503, 50311), json=commit(None, topic, 0, 1))

    # offsets
    send(api, OFFSETS, missing, (404, 40401))
    send(api, OFFSETS, bad, (422, 42204))
    send(redis_down, OFFSETS, empty, (503, 50311))

    # reset
    latest = {"strategy": "latest", "topics": [topic]}
    send(api, RESET, empty, (400, 40002), **malformed)
    send(api, RESET, empty, (422, 42200), json=latest | {"timestamp": -1})
    beyond = {"strategy": "explicit", "offsets": [{"topic": topic, "partition": 0, "offset": 6}]}
    send(api, RESET, empty, (422, 42201), json=beyond)
    send(api, RESET, bad, (422, 42204), json=latest)
    send(api, RESET, empty, (422, 42205), json={"strategy": "latest"})
    send(api, RESET, empty, (422, 42206), json={"strategy": "latest", "topics": [".."]})
    send(api, RESET, empty, (404, 40403), json={"strategy": "latest", "topics": [unique("x")]})
    send(api, RESET, group, (409, 40904), json=latest)
    send(brokers_down, RESET, empty, (503, 50302), json=latest)
    send(redis_down, RESET, empty, (503, 50311), json=latest)

    # list, describe, lag, delete
    send(redis_down, LIST, None, (503, 50311))
    send(api, DESCRIBE, missing, (404, 40401))
    send(api, DESCRIBE, bad, (422, 42204))
    send(redis_down, DESCRIBE, group, (503, 50311))
    send(api, LAG, missing, (404, 40401))
    send(api, LAG, bad, (422, 42204))
    send(brokers_down, LAG, empty, (503, 50302))
    send(redis_down, LAG, empty, (503, 50311))
    send(api, DELETE, missing, (404, 40401))
    send(api, DELETE, bad, (422, 42204))
    send(api, DELETE, group, (409, 40904))
    send(redis_down, DELETE, empty, (503, 50311))

    doc = api.get("/openapi.json").json()
    for operation in OPERATIONS:
        assert documented(doc, operation) == seen.errors[operation], operation
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error_code", "message"]


def test_readiness_documents_and_sends_503(api: TestClient, redis_down: TestClient) -> None:
    ready = api.get("/readyz")
    ready_body = {"status": "ready", "redis": "ok", "failed_tasks": {}}
    assert (ready.status_code, ready.json()) == (200, ready_body)
    not_ready = redis_down.get("/readyz")
    assert not_ready.status_code == 503
    assert not_ready.json()["status"] == "not ready"
    assert "50311" not in not_ready.json()["redis"]  # a sentence, not an error body
    assert "does not answer" in not_ready.json()["redis"]
    responses = api.get("/openapi.json").json()["paths"]["/readyz"]["get"]["responses"]
    assert set(responses) == {"200", "503"}
    schema = responses["503"]["content"]["application/json"]["schema"]
    assert schema["properties"]["status"]["enum"] == ["ready", "not ready"]


def test_references_resolve_and_operations_are_unique(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    check_document(doc)
    refs = re.findall(r'"\$ref": ?"#/components/schemas/([^"]+)"', api.get("/openapi.json").text)
    assert refs
    assert set(refs) <= set(doc["components"]["schemas"])
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    # FastAPI's own validation-error schema would describe a body this service never sends.
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_a_wrong_method_names_every_method_of_the_path(api: TestClient) -> None:
    # Two routes share each of these paths; Starlette alone would name only the first one's.
    for method, path, allow in [
        ("OPTIONS", "/groups/g", "DELETE, GET"),
        ("PUT", "/groups/g/offsets", "GET, POST"),
        ("DELETE", "/groups", "GET"),
    ]:
        response = api.request(method, path)
        assert (response.status_code, response.json()["error_code"]) == (405, 405)
        assert response.headers["allow"] == allow


def test_integers_are_json_integers(api: TestClient, broker: ServiceProcess) -> None:
    """What the document calls an integer is one: 1.0 is (as in JSON Schema); true and "1",
    which pydantic's lax mode would read as 1, are not."""
    topic, group = make_topic(broker, 1), unique("g")
    body = {"member_epoch": 0.0, "topics": [topic], "session_timeout_ms": 5000.0}
    response = api.post(f"/groups/{group}/heartbeat", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["member_epoch"] == 1
    for bad in (True, "5000", 5000.5):
        response = api.post(f"/groups/{group}/heartbeat", json=body | {"session_timeout_ms": bad})
        assert (response.status_code, response.json()["error_code"]) == (422, 42200), bad
