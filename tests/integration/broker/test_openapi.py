"""The broker's OpenAPI document tells the truth: every answer a route gives is documented for it.

The document must be valid OpenAPI with every reference resolving; then a scenario sends each
operation good and bad requests, and every answer's status, media type and error code must be
documented for its operation; every error code documented for an operation must have been seen,
but for the few no request can provoke here (listed in UNPROVOKED with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.records import encode_batch
from headwater_broker.app import create_app
from headwater_broker.settings import BrokerSettings
from tests.integration.broker.in_process import BATCHES, KAFKA_BINARY, KAFKA_JSON, broker
from tests.openapi_document import check_answer, check_document, documented_errors

pytestmark = pytest.mark.anyio

TOPIC = "/topics/{topic}"
PARTITION = "/topics/{topic}/partitions/{partition}"
REASSIGNMENT = PARTITION + "/reassignment"
RECORDS = PARTITION + "/records"
BATCH_PATH = PARTITION + "/batches"
JSON_BODY = {"content-type": "application/json"}
NO_JSON = {"accept": "text/html"}
LIMIT = 64 * 1024
TOO_LARGE = b"x" * (LIMIT + 1)


@dataclass(frozen=True)
class Call:
    """One request and the (status, code) it must get (code 0: a success)."""

    method: str
    template: str
    expect: tuple[int, int]
    topic: str = "t"
    partition: str = "0"
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    content: bytes | None = None

    def url(self) -> str:
        return self.template.replace("{topic}", self.topic).replace("{partition}", self.partition)


def body_errors(method: str, template: str, json: Any, wrong: Any, **at: Any) -> list[Call]:
    """What every JSON-body admin route answers: not JSON, too large, not JSON typed, bad shape,
    and an Accept that allows no JSON answer; ``json`` is a good body, ``wrong`` a bad shape."""
    return [
        Call(method, template, (400, 40002), content=b"{", headers=JSON_BODY, **at),
        Call(method, template, (413, 41301), content=TOO_LARGE, headers=JSON_BODY, **at),
        Call(
            method, template, (415, 415), content=b"{}", headers={"content-type": "text/csv"}, **at
        ),
        Call(method, template, (422, 42200), json=wrong, **at),
        Call(method, template, (406, 406), json=json, headers=NO_JSON, **at),
    ]


def partition_errors(method: str, template: str, **request: Any) -> list[Call]:
    return [
        Call(method, template, (404, 40401), topic="nope", **request),
        Call(method, template, (404, 40402), partition="7", **request),
        Call(method, template, (422, 42200), partition="x", **request),
        Call(method, template, (406, 406), **request, headers=NO_JSON),
    ]


def produce_errors(template: str) -> list[Call]:
    json_body = {"content-type": KAFKA_JSON}
    keyed = {**json_body, "Idempotency-Key": f"key-of-{template}"}
    return [
        Call("POST", template, (400, 40002), content=b"{", headers=json_body),
        Call("POST", template, (404, 40401), topic="nope", json={"records": [{"value": 1}]}),
        Call("POST", template, (406, 406), json={"records": [{"value": 1}]}, headers=NO_JSON),
        Call("POST", template, (413, 41301), content=TOO_LARGE, headers=json_body),
        Call(
            "POST", template, (413, 41302), topic="small", json={"records": [{"value": "x" * 200}]}
        ),
        Call("POST", template, (415, 415), content=b"{}", headers={"content-type": "text/csv"}),
        Call("POST", template, (422, 422), json={"records": []}),
        Call("POST", template, (422, 42205), json={"records": [{"value": 1, "bogus": 1}]}),
        Call("POST", template, (200, 0), json={"records": [{"value": 1}]}, headers=keyed),
        Call("POST", template, (409, 40910), json={"records": [{"value": 1}] * 2}, headers=keyed),
        Call(
            "POST",
            template,
            (422, 42200),
            json={"records": [{"value": 1}]},
            headers={**json_body, "Idempotency-Key": "has space"},
        ),
    ]


def batch(**fields: Any) -> bytes:
    return encode_batch([(None, b"v", [])], **fields)


def scenario(producer: int) -> list[Call]:
    """Every operation, good and bad; ``producer`` is an id whose epoch is 1 (0 is fenced)."""
    raw = {"content-type": BATCHES}
    fenced = batch(producer_id=producer, producer_epoch=0, base_sequence=0)
    gap = batch(producer_id=producer, producer_epoch=1, base_sequence=5)
    unknown = batch(producer_id=987654, producer_epoch=0, base_sequence=0)
    no_sequence = batch(producer_id=producer, producer_epoch=1)
    big = encode_batch([(None, b"x" * 200, [])])
    return [
        Call("GET", "/healthz", (200, 0)),
        Call("GET", "/readyz", (200, 0)),
        Call("GET", "/metrics", (200, 0)),
        Call("GET", "/cluster", (200, 0)),
        Call("GET", "/cluster", (406, 406), headers=NO_JSON),
        # Topics: t (1 partition), small (max.message.bytes 100), doomed (deleted below).
        Call("POST", "/topics", (201, 0), json={"name": "t", "partitions": 1}),
        Call("POST", "/topics", (201, 0), json={"name": "doomed"}),
        Call(
            "POST",
            "/topics",
            (201, 0),
            json={"name": "small", "configs": {"max.message.bytes": "100"}},
        ),
        Call("POST", "/topics", (409, 40901), json={"name": "t"}),
        Call("POST", "/topics", (422, 42201), json={"name": "a/b"}),
        Call("POST", "/topics", (422, 42202), json={"name": "c", "configs": {"nope": "1"}}),
        Call("POST", "/topics", (422, 42203), json={"name": "c", "partitions": 0}),
        Call("POST", "/topics", (422, 42204), json={"name": "c", "replication_factor": 3}),
        Call("POST", "/topics", (422, 42206), json={"name": "c", "replica_assignment": [[7]]}),
        *body_errors("POST", "/topics", {"name": "d"}, {"name": 5}),
        Call("GET", "/topics", (200, 0)),
        Call("GET", "/topics", (406, 406), headers=NO_JSON),
        Call("GET", TOPIC, (200, 0)),
        Call("GET", TOPIC, (404, 40401), topic="nope"),
        Call("GET", TOPIC, (406, 406), headers=NO_JSON),
        Call("PATCH", TOPIC + "/configs", (200, 0), json={"set": {"retention.ms": "1000"}}),
        Call("PATCH", TOPIC + "/configs", (404, 40401), topic="nope", json={}),
        Call("PATCH", TOPIC + "/configs", (422, 42202), json={"set": {"nope": "1"}}),
        *body_errors("PATCH", TOPIC + "/configs", {}, {"set": "x"}),
        Call("POST", TOPIC + "/partitions", (200, 0), topic="doomed", json={"count": 2}),
        Call("POST", TOPIC + "/partitions", (404, 40401), topic="nope", json={"count": 2}),
        Call("POST", TOPIC + "/partitions", (422, 42203), json={"count": 1}),
        *body_errors("POST", TOPIC + "/partitions", {"count": 9}, {"count": "x"}),
        Call("GET", TOPIC + "/partitions", (200, 0)),
        Call("GET", TOPIC + "/partitions", (404, 40401), topic="nope"),
        Call("GET", TOPIC + "/partitions", (406, 406), headers=NO_JSON),
        Call("GET", PARTITION, (200, 0)),
        *partition_errors("GET", PARTITION),
        Call("GET", PARTITION + "/offsets", (200, 0)),
        *partition_errors("GET", PARTITION + "/offsets"),
        Call("GET", PARTITION + "/offsets/lookup", (200, 0), params={"timestamp": 0}),
        Call("GET", PARTITION + "/offsets/lookup", (422, 42200)),
        *partition_errors("GET", PARTITION + "/offsets/lookup", params={"timestamp": 0}),
        Call("POST", REASSIGNMENT, (200, 0), json={"replicas": [0]}),
        Call("POST", REASSIGNMENT, (422, 42206), json={"replicas": [0, 7]}),
        *body_errors("POST", REASSIGNMENT, {"replicas": [0]}, {"replicas": "x"}),
        *partition_errors("POST", REASSIGNMENT, json={"replicas": [0]}),
        Call("GET", REASSIGNMENT, (200, 0)),
        *partition_errors("GET", REASSIGNMENT),
        # Produce.
        Call("POST", TOPIC, (200, 0), json={"records": [{"value": 1}]}),
        Call("POST", TOPIC, (404, 40402), json={"records": [{"value": 1, "partition": 3}]}),
        *produce_errors(TOPIC),
        Call("POST", PARTITION, (200, 0), json={"records": [{"value": 1}]}),
        Call("POST", PARTITION, (404, 40402), partition="5", json={"records": [{"value": 1}]}),
        Call("POST", PARTITION, (422, 42200), partition="x", json={"records": [{"value": 1}]}),
        *produce_errors(PARTITION),
        Call("POST", BATCH_PATH, (200, 0), content=batch(), headers=raw),
        Call("POST", BATCH_PATH, (204, 0), content=batch(), headers=raw, params={"acks": "0"}),
        Call("POST", BATCH_PATH, (400, 40003), content=batch()[:-1], headers=raw),
        Call("POST", BATCH_PATH, (404, 40401), topic="nope", content=batch(), headers=raw),
        Call("POST", BATCH_PATH, (404, 40402), partition="4", content=batch(), headers=raw),
        Call("POST", BATCH_PATH, (404, 40405), content=unknown, headers=raw),
        Call("POST", BATCH_PATH, (406, 406), content=batch(), headers={**raw, **NO_JSON}),
        Call("POST", BATCH_PATH, (409, 40902), content=gap, headers=raw),
        Call("POST", BATCH_PATH, (409, 40903), content=fenced, headers=raw),
        Call("POST", BATCH_PATH, (413, 41301), content=TOO_LARGE, headers=raw),
        Call("POST", BATCH_PATH, (413, 41302), topic="small", content=big, headers=raw),
        Call("POST", BATCH_PATH, (415, 415), content=batch(), headers=JSON_BODY),
        Call("POST", BATCH_PATH, (422, 42200), content=batch(), headers=raw, params={"acks": "2"}),
        Call("POST", BATCH_PATH, (422, 42205), content=no_sequence, headers=raw),
        # Producers.
        Call("POST", "/producers", (200, 0), json={}),
        Call("POST", "/producers", (404, 40405), json={"producer_id": 987654, "producer_epoch": 0}),
        Call(
            "POST", "/producers", (409, 40903), json={"producer_id": producer, "producer_epoch": 7}
        ),
        *body_errors("POST", "/producers", {}, {"producer_id": "x"}),
        # Fetch: offset 0 of t holds JSON; the binary value stored in "doomed" is not.
        Call("GET", RECORDS, (200, 0), headers={"accept": KAFKA_JSON}),
        Call("GET", RECORDS, (200, 0), headers={"accept": BATCHES}),
        Call("GET", RECORDS, (400, 40004), params={"offset": -1}),
        Call("GET", RECORDS, (406, 40602), topic="doomed", headers={"accept": KAFKA_JSON}),
        Call("GET", RECORDS, (416, 41601), params={"offset": 999}),
        *partition_errors("GET", RECORDS),
        Call("DELETE", TOPIC, (204, 0), topic="doomed"),
        Call("DELETE", TOPIC, (404, 40401), topic="doomed"),
        Call("DELETE", TOPIC, (406, 406), headers=NO_JSON),
    ]


# Documented codes no request of this scenario can provoke: the disk failing under a read or a
# write (50003, any operation); on produce, a name no topic can have, which only a broker with
# BROKER_AUTO_CREATE_TOPICS=true answers 42201 rather than 40401.
UNPROVOKED = {
    ("POST", TOPIC): {42201},
    ("POST", PARTITION): {42201},
    ("POST", BATCH_PATH): {42201},
}
STORAGE_ERROR = 50003
# What only a cluster of several brokers (or one losing its metadata store) answers: 421 42101
# for a relayed request at a broker that does not lead the partition, 503 50302 while none does,
# 503 50303/50304 and 504 50401 for acks=all, 503 50305 while there is no controller, 503 50306
# while the store is unreachable, 503 50307 for offsets at a new leader whose high watermark has
# not reached its epoch's start, 502 50201 for a REST produce relayed to a leader whose answer
# was lost. tests/e2e/cluster, tests/e2e/headwater/test_cluster_routing.py, tests/e2e/replication
# and tests/unit/broker/test_replication_scenarios.py provoke them; here one broker leads
# everything and is the controller.
CLUSTER_ONLY = {42101, 50201, 50302, 50303, 50304, 50305, 50306, 50307, 50401}


async def test_the_document_is_valid_and_constraints_are_in_it(tmp_path: Path) -> None:
    async with broker(tmp_path) as client:
        document = (await client.get("/openapi.json")).json()
    check_document(document)
    schemas = document["components"]["schemas"]
    assert {"ProduceRequest", "ProduceRecord", "ProduceHeader"} <= set(schemas)
    produce = document["paths"][TOPIC]["post"]
    body = produce["requestBody"]["content"][KAFKA_BINARY]["schema"]
    assert body == {"$ref": "#/components/schemas/ProduceRequest"}
    parameters = {p["name"]: p["schema"] for p in document["paths"][RECORDS]["get"]["parameters"]}
    assert parameters["topic"]["pattern"] == r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,249}$"
    assert (parameters["partition"]["minimum"], parameters["partition"]["maximum"]) == (0, 9999)
    # Broker-to-broker routes are not part of the public document.
    assert not {"/replication/fetch", "/cluster/controller/isr"} & set(document["paths"])
    batches = document["paths"][BATCH_PATH]["post"]["responses"]
    assert batches["421"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/NotLeaderBody"
    }
    assert "Retry-After" in batches["503"]["headers"]
    ready = document["paths"]["/readyz"]["get"]["responses"]["503"]
    assert ready["content"]["application/json"]["schema"]["required"] == ["status"]


def closed_scenario() -> list[Call]:
    """Produce at a broker that has closed (as while it shuts down, or once another process took
    its id): refused before anything is written."""
    raw = {"content-type": BATCHES}
    records = {"records": [{"value": 1}]}
    return [
        Call("POST", TOPIC, (503, 50301), json=records),
        Call("POST", PARTITION, (503, 50301), json=records),
        Call("POST", BATCH_PATH, (503, 50301), content=batch(), headers=raw),
    ]


async def test_every_answer_is_documented_and_every_documented_error_is_given(
    tmp_path: Path,
) -> None:
    app = create_app(BrokerSettings(data_dir=str(tmp_path), max_request_bytes=LIMIT))
    transport = httpx.ASGITransport(app=app)
    seen: dict[tuple[str, str], set[tuple[int, int]]] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:

        async def send(call: Call) -> None:
            response = await client.request(
                call.method,
                call.url(),
                params=call.params,
                headers=call.headers,
                json=call.json,
                content=call.content,
            )
            got = check_answer(document, call.method, call.template, response)
            assert got == call.expect, (call, response.text[:300])
            if got[0] == 503:
                assert response.headers["retry-after"] == "1"
            seen.setdefault((call.method, call.template), set()).add(got)

        async with app.router.lifespan_context(app):
            document = (await client.get("/openapi.json")).json()
            producer = (await client.post("/producers", json={})).json()["producer_id"]
            bumped = {"producer_id": producer, "producer_epoch": 0}
            assert (await client.post("/producers", json=bumped)).json()["producer_epoch"] == 1
            for call in scenario(producer):
                if call.template == RECORDS and call.topic == "doomed":
                    binary = {"records": [{"value": "AAE="}]}
                    await client.post(
                        "/topics/doomed/partitions/0",
                        json=binary,
                        headers={"content-type": KAFKA_BINARY},
                    )
                await send(call)
        for call in closed_scenario():
            await send(call)
    for path, operations in document["paths"].items():
        for method, _operation in operations.items():
            key = (method.upper(), path)
            assert key in seen, f"{key} not exercised"
            documented = {
                pair
                for pair in documented_errors(document, method, path)
                if pair[1] != STORAGE_ERROR
                and pair[1] not in CLUSTER_ONLY
                and pair[1] not in UNPROVOKED.get(key, set())
            }
            assert documented == {pair for pair in seen[key] if pair[1]}, key
