"""Requests this broker makes to the other brokers: relays to a leader or the controller.

A request that only one broker can answer (a partition's leader, the controller) but that
arrived elsewhere is sent on by the broker that received it, marked with ``FORWARDED_BY`` (so
it is never sent on a second time: a broker that receives a marked request it cannot answer
answers 421 or 503 itself) and ``METADATA_OFFSET`` (the change the sender's metadata reflects:
the receiver waits, briefly, until its own metadata has caught up, so a topic created a moment
ago at the controller is known at its leaders). Path segments are percent-escaped, so a topic
name cannot reach another route.

A peer that does not answer is a retriable error: 503 50302 for a leader, 50305 for the
controller.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from headwater.errors import (
    BROKER,
    HeadwaterError,
    LeaderNotAvailableError,
    NotControllerError,
    RelayOutcomeUnknownError,
)
from headwater.records.batch import RecordTuple
from headwater.types import Offset
from headwater_broker.idempotency import HEADER as IDEMPOTENCY_KEY

FORWARDED_BY = "Headwater-Forwarded-By"
METADATA_OFFSET = "Headwater-Metadata-Offset"
KAFKA_BINARY = "application/vnd.kafka.binary.v2+json"

# Failures of a request that never left this broker: nothing reached the peer.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Request headers a relay passes on; everything else (host, length, encodings) is httpx's.
RELAYED_REQUEST_HEADERS = ("content-type", "accept", "acks")
# Answer headers a relay passes back.
RELAYED_ANSWER_HEADERS = ("content-type", "retry-after")


def segment(value: str | int) -> str:
    """One path segment, percent-escaped (``/``, ``?``, ``%`` and ``#`` included)."""
    return quote(str(value), safe="")


@dataclass(frozen=True)
class Relayed:
    """A peer's answer, to be passed back as it came."""

    status: int
    headers: dict[str, str]
    content: bytes


class Peers:
    """One HTTP client for every peer broker (connections kept alive between requests)."""

    def __init__(self, timeout_ms: int, broker_id: int, ssl_context: ssl.SSLContext) -> None:
        self.broker_id = broker_id
        self.timeout_s = timeout_ms / 1000
        self._client = httpx.AsyncClient(timeout=self.timeout_s, verify=ssl_context)

    async def close(self) -> None:
        await self._client.aclose()

    def _headers(self, metadata_offset: int) -> dict[str, str]:
        return {FORWARDED_BY: str(self.broker_id), METADATA_OFFSET: str(metadata_offset)}

    async def relay(
        self,
        base_url: str,
        method: str,
        path: str,
        headers: Mapping[str, str],
        content: bytes,
        metadata_offset: int,
        *,
        controller: bool = False,
        extra_wait_s: float = 0.0,
    ) -> Relayed:
        """Send a request on unchanged (``path`` already escaped, query included).

        ``extra_wait_s`` lengthens the timeout by what the peer may wait on purpose (a fetch's
        long-poll).
        """
        sent = {k: v for k, v in headers.items() if k.lower() in RELAYED_REQUEST_HEADERS}
        sent.update(self._headers(metadata_offset))
        try:
            answer = await self._client.request(
                method,
                base_url.rstrip("/") + path,
                headers=sent,
                content=content,
                timeout=self.timeout_s + extra_wait_s,
            )
        except httpx.HTTPError as exc:
            raise _unreachable(base_url, exc, controller) from None
        kept = {
            k: v
            for k, v in answer.headers.items()
            if k.lower() in RELAYED_ANSWER_HEADERS or k.lower().startswith("headwater-")
        }
        kept[FORWARDED_BY] = str(self.broker_id)
        return Relayed(answer.status_code, kept, answer.content)

    async def _json(
        self,
        method: str,
        url: str,
        metadata_offset: int,
        body: Any = None,
        content_type: str = "application/json",
        controller: bool = False,
        headers: Mapping[str, str] | None = None,
        writes: bool = False,
    ) -> Any:
        """``writes``: the request appends records, so a failure after it was sent is reported
        as an unknown outcome (502 50201), not as a leader that could not be reached."""
        sent = {**self._headers(metadata_offset), **(headers or {})}
        content = None
        if body is not None:
            sent["content-type"] = content_type
            content = orjson.dumps(body)
        try:
            answer = await self._client.request(method, url, headers=sent, content=content)
        except httpx.HTTPError as exc:
            if writes and not isinstance(exc, _NOT_SENT):
                raise RelayOutcomeUnknownError(
                    f"The produce relayed to the partition's leader at {url} was sent, but its "
                    f"answer was lost ({type(exc).__name__}): the records may have been "
                    f"appended. Retry with the same {IDEMPOTENCY_KEY} to be answered the first "
                    "attempt's offsets instead of storing them twice"
                ) from None
            raise _unreachable(url, exc, controller) from None
        decoded = orjson.loads(answer.content) if answer.content else None
        if answer.status_code >= 400:
            raise BROKER.from_body(answer.status_code, decoded)
        return decoded

    async def produce(
        self,
        base_url: str,
        topic: str,
        partition: int,
        records: Sequence[RecordTuple],
        metadata_offset: int,
        *,
        idempotency_key: str | None = None,
    ) -> list[Offset]:
        """Produce records to one partition at its leader; the offsets they landed at.

        A request that could not be sent is 503 50302 (nothing was appended: retry); one sent
        whose answer was lost is 502 50201 (the leader may have appended the records).
        """
        body = {"records": [_binary_record(r) for r in records]}
        url = f"{base_url.rstrip('/')}/topics/{segment(topic)}/partitions/{segment(partition)}"
        extra = {} if idempotency_key is None else {IDEMPOTENCY_KEY: idempotency_key}
        answer = await self._json(
            "POST", url, metadata_offset, body, KAFKA_BINARY, headers=extra, writes=True
        )
        return [Offset(int(o["offset"])) for o in answer["offsets"]]

    async def offsets(
        self, base_url: str, topic: str, partition: int
    ) -> tuple[Offset, Offset] | None:
        """A partition's (beginning, end) offsets from its leader; None if it does not answer."""
        url = (
            f"{base_url.rstrip('/')}/topics/{segment(topic)}/partitions/{segment(partition)}"
            "/offsets"
        )
        try:
            answer = await self._json("GET", url, 0)
        except (HeadwaterError, ValueError):  # an error answer, or not the JSON expected
            return None
        return Offset(int(answer["beginning_offset"])), Offset(int(answer["end_offset"]))

    async def create_topic(
        self,
        base_url: str,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, str] | None = None,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Create a topic at the controller (defaults where an argument is None)."""
        body: dict[str, Any] = {"name": name}
        if partitions is not None:
            body["partitions"] = partitions
        if configs:
            body["configs"] = dict(configs)
        if assignment is not None:
            body["replica_assignment"] = [list(a) for a in assignment]
        await self._json("POST", f"{base_url.rstrip('/')}/topics", 0, body, controller=True)


def _binary_record(record: RecordTuple) -> dict[str, Any]:
    key, value, headers = record

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    out: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if headers:
        out["headers"] = [{"key": k, "value": b64(v)} for k, v in headers]
    return out


def _unreachable(
    url: str, exc: Exception, controller: bool
) -> LeaderNotAvailableError | NotControllerError:
    message = f"{url} did not answer ({type(exc).__name__}); retry"
    if controller:
        return NotControllerError(f"The controller at {message}")
    return LeaderNotAvailableError(f"The partition's leader at {message}")
