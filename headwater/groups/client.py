"""A typed synchronous client for the coordinator's HTTP API (services/coordinator).

Each method is one request; error bodies come back as the typed errors of
``headwater.groups.errors.COORDINATOR`` and transport failures as ``httpx.TransportError``. With
several URLs, requests go round-robin over them (as behind a load-balanced Service) and a URL that
fails at the transport level is skipped for that request. Thread-safe (one ``httpx.Client``).
"""

from __future__ import annotations

import itertools
import ssl
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from headwater.client.tls import shared_ssl_context
from headwater.closeable import Closeable
from headwater.groups.errors import COORDINATOR, GroupNotFoundError
from headwater.topic_partition import TopicPartition
from headwater.types import MemberEpoch, Offset, PartitionId

DEFAULT_COORDINATOR = "http://127.0.0.1:8090"


def encode_owned(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(int(tp.partition))
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def decode_assignment(raw: Iterable[Mapping[str, Any]]) -> frozenset[TopicPartition]:
    return frozenset(
        TopicPartition(entry["topic"], PartitionId(p)) for entry in raw for p in entry["partitions"]
    )


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: MemberEpoch
    heartbeat_interval_ms: int
    assignment: frozenset[TopicPartition]


class CoordinatorClient(Closeable):
    """The coordinator's routes as typed methods."""

    def __init__(
        self,
        urls: str | Sequence[str] = DEFAULT_COORDINATOR,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if isinstance(urls, str):
            urls = [u for u in urls.split(",") if u.strip()]
        self.urls = [u.strip().rstrip("/") for u in urls]
        if not self.urls:
            raise ValueError("at least one coordinator URL is required")
        self._next = itertools.count()
        self._lock = threading.Lock()
        self._http = httpx.Client(
            timeout=timeout, transport=transport, verify=ssl_context or shared_ssl_context()
        )

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        with self._lock:
            start = next(self._next)
        content = None if body is None else orjson.dumps(body)
        headers = {} if body is None else {"Content-Type": "application/json"}
        error: httpx.TransportError | None = None
        for i in range(len(self.urls)):
            url = self.urls[(start + i) % len(self.urls)]
            try:
                response = self._http.request(method, url + path, content=content, headers=headers)
            except httpx.TransportError as exc:
                error = exc
                continue
            if response.status_code >= 400:
                try:
                    payload: Any = orjson.loads(response.content)
                except orjson.JSONDecodeError:
                    payload = response.text
                raise COORDINATOR.from_body(response.status_code, payload)
            return orjson.loads(response.content) if response.content else None
        assert error is not None
        raise error

    @staticmethod
    def _group(group_id: str) -> str:
        return f"/groups/{quote(group_id, safe='')}"

    # -- membership and offsets ---------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        *,
        member_id: str | None,
        member_epoch: int,
        topics: Iterable[str] | None = None,
        owned: Iterable[TopicPartition] | None = None,
        instance_id: str | None = None,
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
        wait_ms: int = 0,
    ) -> HeartbeatAnswer:
        """One heartbeat; ``wait_ms`` > 0 lets the coordinator hold an answer that has no news
        until the group changes (long-poll)."""
        body: dict[str, Any] = {"member_id": member_id, "member_epoch": member_epoch}
        if wait_ms:
            body["wait_ms"] = wait_ms
        if topics is not None:
            body["topics"] = sorted(topics)
        if owned is not None:
            body["owned"] = encode_owned(owned)
        for key, value in (
            ("instance_id", instance_id),
            ("session_timeout_ms", session_timeout_ms),
            ("rebalance_timeout_ms", rebalance_timeout_ms),
            ("assignor", assignor),
        ):
            if value is not None:
                body[key] = value
        answer = self._request("POST", self._group(group_id) + "/heartbeat", body)
        return HeartbeatAnswer(
            member_id=answer["member_id"],
            member_epoch=MemberEpoch(answer["member_epoch"]),
            heartbeat_interval_ms=answer["heartbeat_interval_ms"],
            assignment=decode_assignment(answer["assignment"]),
        )

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        metadata: str = "",
    ) -> None:
        """Commit ``offsets`` (the next offset to consume per partition)."""
        body = {
            "member_id": member_id,
            "member_epoch": member_epoch,
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": o, "metadata": metadata}
                for tp, o in sorted(offsets.items())
            ],
        }
        self._request("POST", self._group(group_id) + "/offsets", body)

    def committed(self, group_id: str) -> dict[TopicPartition, Offset]:
        """Committed offsets of the group ({} when the group does not exist)."""
        try:
            body = self._request("GET", self._group(group_id) + "/offsets")
        except GroupNotFoundError:
            return {}
        return {
            TopicPartition(o["topic"], PartitionId(o["partition"])): Offset(o["offset"])
            for o in body["offsets"]
        }

    # -- admin --------------------------------------------------------------------------------

    def list_groups(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request("GET", "/groups")
        return result

    def describe(self, group_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", self._group(group_id))
        return result

    def lag(self, group_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", self._group(group_id) + "/lag")
        return result

    def offsets(self, group_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", self._group(group_id) + "/offsets")
        return result

    def reset(self, group_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._request(
            "POST", self._group(group_id) + "/offsets/reset", dict(body)
        )
        return result

    def delete(self, group_id: str) -> None:
        self._request("DELETE", self._group(group_id))
