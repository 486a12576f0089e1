"""REST Proxy v2 conformance: content negotiation on every route and error, REST Proxy's codes."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.broker.in_process import BATCHES, KAFKA_BINARY, KAFKA_JSON
from tests.integration.broker.test_produce import end_offsets, make_topic

pytestmark = pytest.mark.anyio

V2 = "application/vnd.kafka.v2+json"
JSON = "application/json"
JAVA_DEFAULT_ACCEPT = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"


@pytest.mark.parametrize(
    ("accept", "label"),
    [
        (V2, V2),
        (JSON, JSON),
        ("*/*", V2),
        (JAVA_DEFAULT_ACCEPT, V2),
        (f"{JSON}; q=0.9, {V2}; q=0.5", JSON),
        (f"{JSON}; q=0.5, {V2}; q=0.9", V2),
        (f"text/html, {JSON};q=0.1", JSON),
        (f"{KAFKA_BINARY}, {V2}; q=0.8", KAFKA_BINARY),
    ],
)
async def test_answers_and_errors_are_labelled_as_accept_asks(
    client: httpx.AsyncClient, accept: str, label: str
) -> None:
    topic = await make_topic(client)
    headers = {"accept": accept}
    answers = {
        "list": await client.get("/topics", headers=headers),
        "describe": await client.get(f"/topics/{topic}", headers=headers),
        "offsets": await client.get(f"/topics/{topic}/partitions/0/offsets", headers=headers),
        "produce": await client.post(
            f"/topics/{topic}",
            json={"records": [{"value": 1}]},
            headers={**headers, "content-type": KAFKA_JSON},
        ),
        "no topic": await client.get("/topics/nope", headers=headers),
        "no partition": await client.get(f"/topics/{topic}/partitions/7", headers=headers),
        "no route": await client.get("/nowhere", headers=headers),
        "no method": await client.put("/topics", headers=headers),
        "bad body": await client.post(
            f"/topics/{topic}", content=b"{", headers={**headers, "content-type": KAFKA_JSON}
        ),
    }
    for what, answer in answers.items():
        assert answer.headers["content-type"] == label, (what, answer.status_code)
    statuses = [a.status_code for a in answers.values()]
    assert statuses == [200, 200, 200, 200, 404, 404, 404, 405, 400]


async def test_errors_are_json_even_when_accept_allows_none(client: httpx.AsyncClient) -> None:
    refused = await client.get("/topics", headers={"accept": "text/html"})
    assert (refused.status_code, refused.headers["content-type"]) == (406, V2)
    assert refused.json()["error_code"] == 406
    missing = await client.get("/topics/nope/partitions/0/records", headers={"accept": BATCHES})
    assert (missing.status_code, missing.headers["content-type"]) == (404, V2)
    assert missing.json()["error_code"] == 40401


async def test_kernel_routes_keep_their_own_types(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json"):
        answer = await client.get(path, headers={"accept": V2})
        assert answer.headers["content-type"] == JSON, path


async def test_not_found_messages_are_worded_as_rest_proxy_words_them(
    client: httpx.AsyncClient,
) -> None:
    topic = await make_topic(client)
    no_topic = (await client.get("/topics/nope")).json()
    assert no_topic["error_code"] == 40401
    assert no_topic["message"].startswith("Topic not found.")
    no_partition = (await client.get(f"/topics/{topic}/partitions/3/offsets")).json()
    assert no_partition["error_code"] == 40402
    assert no_partition["message"].startswith("Partition not found.")


@pytest.mark.parametrize("body", [b"", b"   ", b"null", b"{}", b'{"records": []}'])
@pytest.mark.parametrize("path", ["/topics/{t}", "/topics/{t}/partitions/0"])
async def test_a_produce_without_records_is_422(
    client: httpx.AsyncClient, body: bytes, path: str
) -> None:
    topic = await make_topic(client)
    answer = await client.post(
        path.format(t=topic), content=body, headers={"content-type": KAFKA_JSON}
    )
    assert (answer.status_code, answer.json()["error_code"]) == (422, 422)
    assert answer.headers["content-type"] == V2
    assert await end_offsets(client, topic) == [0]


async def test_an_unsupported_content_type_is_415(client: httpx.AsyncClient) -> None:
    topic = await make_topic(client)
    for path, content_type in [
        (f"/topics/{topic}", "text/plain"),
        (f"/topics/{topic}/partitions/0", "application/xml"),
        (f"/topics/{topic}/partitions/0/batches", KAFKA_JSON),
        ("/topics", "text/csv"),
    ]:
        answer = await client.post(path, content=b"x", headers={"content-type": content_type})
        assert (answer.status_code, answer.json()["error_code"]) == (415, 415), path
    assert await end_offsets(client, topic) == [0]
