"""A typed synchronous client for every route of the broker HTTP API (docs/broker-api.md).

Each method is one request; error bodies come back as the typed errors of
``headwater.errors.BROKER`` (``TopicNotFoundError``, ``OffsetOutOfRangeError``, ...), and transport
failures as ``httpx.TransportError``. The client is thread-safe (one ``httpx.Client`` with a
connection pool); tests pass their own ``transport`` (``httpx.MockTransport``, an ASGI app).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx
import orjson

from headwater.client.tls import shared_ssl_context
from headwater.closeable import Closeable
from headwater.errors import BROKER, HeadwaterError
from headwater.types import BrokerId, Offset, PartitionId, ProducerEpoch, ProducerId, TimestampMs

BATCHES_MEDIA_TYPE = "application/vnd.headwater.batches"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"


@dataclass(frozen=True, slots=True)
class Replica:
    broker: BrokerId
    leader: bool
    in_sync: bool


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """A partition as ``GET /topics/{t}`` describes it (offsets absent in partition listings,
    and None where the answering broker cannot tell them: it sends -1 while the leader is down).

    ``leader`` is -1 while the partition has no leader; ``leader_epoch`` is -1 from a broker
    that does not report one. ``replicas`` come as objects (``{"broker", "leader",
    "in_sync"}``) or as broker ids beside an ``isr`` list; both read the same.
    """

    partition: PartitionId
    leader: BrokerId
    replicas: tuple[Replica, ...]
    beginning_offset: Offset | None = None
    end_offset: Offset | None = None
    leader_epoch: int = -1
    isr: tuple[BrokerId, ...] = ()

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PartitionDescription:
        leader = BrokerId(body.get("leader", -1) if body.get("leader") is not None else -1)
        raw_isr = body.get("isr")
        replicas: list[Replica] = []
        for r in body.get("replicas", ()):
            if isinstance(r, Mapping):
                replicas.append(
                    Replica(BrokerId(r["broker"]), bool(r["leader"]), bool(r["in_sync"]))
                )
            else:
                in_sync = raw_isr is None or r in raw_isr
                replicas.append(Replica(BrokerId(r), r == leader, in_sync))
        isr = (
            tuple(BrokerId(b) for b in raw_isr)
            if raw_isr is not None
            else tuple(r.broker for r in replicas if r.in_sync)
        )
        begin = body.get("beginning_offset")
        end = body.get("end_offset")
        epoch = body.get("leader_epoch")
        return cls(
            partition=PartitionId(body["partition"]),
            leader=leader,
            replicas=tuple(replicas),
            # -1 (or null): the answering broker cannot tell (the leader is down).
            beginning_offset=None if begin is None or begin < 0 else Offset(begin),
            end_offset=None if end is None or end < 0 else Offset(end),
            leader_epoch=epoch if isinstance(epoch, int) else -1,
            isr=isr,
        )


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionDescription, ...]
    configs: dict[str, str]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TopicDescription:
        return cls(
            name=body["name"],
            partitions=tuple(PartitionDescription.from_json(p) for p in body["partitions"]),
            configs={str(k): str(v) for k, v in body.get("configs", {}).items()},
        )


@dataclass(frozen=True, slots=True)
class ClusterBroker:
    """One broker as ``GET /cluster`` lists it (``state``: ``active``, ``fenced``,
    ``shutting_down``)."""

    broker_id: BrokerId
    url: str
    rack: str | None
    state: str


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """``GET /cluster``: the cluster id, the controller (-1 and epoch -1 when none) and the
    brokers."""

    cluster_id: str
    controller_id: BrokerId
    controller_epoch: int
    brokers: tuple[ClusterBroker, ...]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ClusterDescription:
        controller = body.get("controller") or {}
        brokers = tuple(
            ClusterBroker(
                BrokerId(b["broker_id"]),
                str(b["url"]).rstrip("/"),
                b.get("rack"),
                str(b.get("state", "active")),
            )
            for b in body.get("brokers", ())
        )
        return cls(
            cluster_id=str(body.get("cluster_id", "")),
            controller_id=BrokerId(controller.get("broker_id", -1)),
            controller_epoch=int(controller.get("epoch", -1)),
            brokers=brokers,
        )


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition's replicas and the move under way, if any
    (``GET /topics/{t}/partitions/{p}/reassignment``).

    As Kafka's ``PartitionReassignment``: ``replicas`` is the current list -- during a move, the
    targets followed by the replicas being removed -- with ``adding_replicas`` (targets catching
    up) and ``removing_replicas`` (replicas that leave once every target is in sync).
    ``target_replicas`` is the list once the move completes; ``in_progress`` is False when
    nothing moves (then ``replicas == target_replicas``). ``leader`` is -1 while the partition
    has none.
    """

    topic: str
    partition: PartitionId
    in_progress: bool
    replicas: tuple[BrokerId, ...]
    target_replicas: tuple[BrokerId, ...]
    adding_replicas: tuple[BrokerId, ...]
    removing_replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    leader: BrokerId
    leader_epoch: int
    partition_epoch: int

    @property
    def original_replicas(self) -> tuple[BrokerId, ...]:
        """The replicas before the move, as the partition lists them now (those not being
        added); reassigning to them cancels the move."""
        return tuple(b for b in self.replicas if b not in self.adding_replicas)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PartitionReassignment:
        def ids(key: str) -> tuple[BrokerId, ...]:
            return tuple(BrokerId(int(b)) for b in body.get(key, ()))

        return cls(
            topic=str(body["topic"]),
            partition=PartitionId(int(body["partition"])),
            in_progress=bool(body["in_progress"]),
            replicas=ids("replicas"),
            target_replicas=ids("target_replicas"),
            adding_replicas=ids("adding"),
            removing_replicas=ids("removing"),
            isr=ids("isr"),
            leader=BrokerId(int(body.get("leader", -1))),
            leader_epoch=int(body.get("leader_epoch", -1)),
            partition_epoch=int(body.get("partition_epoch", -1)),
        )


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    beginning_offset: Offset
    end_offset: Offset


@dataclass(frozen=True, slots=True)
class ProducedOffset:
    """One record's result from a REST Proxy style produce."""

    partition: PartitionId
    offset: Offset
    error_code: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class BatchAck:
    """The broker's answer for one appended batch (``log_append_time`` -1 for CreateTime)."""

    base_offset: Offset
    last_offset: Offset
    log_append_time: TimestampMs
    duplicate: bool


@dataclass(frozen=True, slots=True)
class FetchedBatches:
    """Raw stored batches from a fetch; the first may begin before the requested offset."""

    data: bytes
    high_watermark: Offset
    log_start_offset: Offset
    next_offset: Offset


class ProducerIdentity(NamedTuple):
    """An idempotent producer's id and epoch, as ``POST /producers`` hands them out."""

    producer_id: ProducerId
    producer_epoch: ProducerEpoch


class TimestampOffset(NamedTuple):
    """The earliest offset at or after a timestamp and that record's timestamp (None, None past
    the last record)."""

    offset: Offset | None
    timestamp: TimestampMs | None


def _acks_param(acks: int | str) -> str:
    text = str(acks).lower()
    return "all" if text in ("all", "-1") else text


class BrokerClient(Closeable):
    """One broker's HTTP API as typed methods.

    ``base_url`` is the broker's URL (``http://127.0.0.1:8082``). ``timeout`` (seconds) applies to
    each request; a long-poll fetch adds its ``max_wait_ms`` to it.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        client_id: str = "headwater-python",
        max_connections: int = 16,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            verify=ssl_context or shared_ssl_context(),
            headers={"User-Agent": f"headwater-python ({client_id})"},
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    # -- plumbing -----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        body = content
        all_headers = dict(headers or {})
        if json is not None:
            body = orjson.dumps(json)
            all_headers.setdefault("Content-Type", "application/json")
        response = self._http.request(
            method,
            path,
            content=body,
            params=params,
            headers=all_headers,
            timeout=timeout if timeout is not None else self.timeout,
        )
        if response.status_code >= 400:
            raise self._error(response)
        return response

    @staticmethod
    def _error(response: httpx.Response) -> HeadwaterError:
        try:
            body: Any = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            body = response.text
        error = BROKER.from_body(response.status_code, body)
        retry_after = response.headers.get("Retry-After")
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: Headwater sends seconds
                error.retry_after = max(float(retry_after), 0.0)
        return error

    @staticmethod
    def _topic_path(topic: str) -> str:
        return f"/topics/{quote(topic, safe='')}"

    def close(self) -> None:
        self._http.close()

    # -- health -------------------------------------------------------------------------------

    def healthy(self) -> bool:
        """True when ``GET /healthz`` answers 200."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    # -- cluster ------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription | None:
        """``GET /cluster``: the cluster id, the controller and every broker with its URL; None
        from a broker that has no such route (one that predates the cluster: it serves every
        partition itself)."""
        response = self._http.get("/cluster")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise self._error(response)
        return ClusterDescription.from_json(response.json())

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        body: dict[str, Any] = {"name": name}
        if partitions is not None:
            body["partitions"] = partitions
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        if configs:
            body["configs"] = {k: str(v) for k, v in configs.items()}
        return TopicDescription.from_json(self._request("POST", "/topics", json=body).json())

    def list_topics(self) -> list[str]:
        names: list[str] = self._request("GET", "/topics").json()
        return names

    def describe_topic(self, topic: str) -> TopicDescription:
        return TopicDescription.from_json(self._request("GET", self._topic_path(topic)).json())

    def delete_topic(self, topic: str) -> None:
        self._request("DELETE", self._topic_path(topic))

    def alter_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete: Sequence[str] = (),
    ) -> TopicDescription:
        """Set and delete config overrides of ``topic`` in one change."""
        body = {"set": {k: str(v) for k, v in (set_configs or {}).items()}, "delete": list(delete)}
        path = f"{self._topic_path(topic)}/configs"
        return TopicDescription.from_json(self._request("PATCH", path, json=body).json())

    def create_partitions(self, topic: str, count: int) -> TopicDescription:
        """Grow ``topic`` to ``count`` partitions in total."""
        path = f"{self._topic_path(topic)}/partitions"
        return TopicDescription.from_json(self._request("POST", path, json={"count": count}).json())

    def list_partitions(self, topic: str) -> list[PartitionDescription]:
        path = f"{self._topic_path(topic)}/partitions"
        return [PartitionDescription.from_json(p) for p in self._request("GET", path).json()]

    def describe_partition(self, topic: str, partition: int) -> PartitionDescription:
        path = f"{self._topic_path(topic)}/partitions/{partition}"
        return PartitionDescription.from_json(self._request("GET", path).json())

    def reassign_partition(
        self, topic: str, partition: int, replicas: Sequence[int]
    ) -> PartitionReassignment:
        """Start moving a partition to ``replicas`` (the replicas of before cancel a move);
        answered once the controller started it."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/reassignment"
        body = {"replicas": [int(b) for b in replicas]}
        return PartitionReassignment.from_json(self._request("POST", path, json=body).json())

    def partition_reassignment(self, topic: str, partition: int) -> PartitionReassignment:
        """A partition's replicas and the move in progress, from this broker's metadata."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/reassignment"
        return PartitionReassignment.from_json(self._request("GET", path).json())

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        """The partition's log start offset and end offset (the next offset to be written)."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/offsets"
        body = self._request("GET", path).json()
        return PartitionOffsets(Offset(body["beginning_offset"]), Offset(body["end_offset"]))

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> TimestampOffset:
        """The earliest offset whose timestamp is >= ``timestamp`` and that record's timestamp."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/offsets/lookup"
        body = self._request("GET", path, params={"timestamp": timestamp}).json()
        offset, ts = body.get("offset"), body.get("timestamp")
        return TimestampOffset(
            None if offset is None else Offset(offset),
            None if ts is None else TimestampMs(ts),
        )

    # -- produce ------------------------------------------------------------------------------

    def produce_json(
        self,
        topic: str,
        records: Sequence[Mapping[str, Any]],
        *,
        partition: int | None = None,
        embedded: str = "json",
    ) -> list[ProducedOffset]:
        """REST Proxy v2 produce: ``records`` as ``{"key"?, "value"?, "partition"?, "headers"?}``.

        ``embedded`` is ``json`` (keys/values any JSON) or ``binary`` (base64 strings).
        """
        path = self._topic_path(topic)
        if partition is not None:
            path += f"/partitions/{partition}"
        media = BINARY_V2 if embedded == "binary" else JSON_V2
        response = self._request(
            "POST",
            path,
            content=orjson.dumps({"records": list(records)}),
            headers={"Content-Type": media, "Accept": "application/json"},
        )
        return [
            ProducedOffset(
                PartitionId(o["partition"]),
                Offset(o["offset"]),
                o.get("error_code"),
                o.get("error"),
            )
            for o in response.json()["offsets"]
        ]

    def produce_batches(
        self, topic: str, partition: int, batches: bytes, *, acks: int | str = 1
    ) -> list[BatchAck]:
        """Append one or more encoded RecordBatch v2; ``[]`` when ``acks`` is 0."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/batches"
        response = self._request(
            "POST",
            path,
            content=batches,
            params={"acks": _acks_param(acks)},
            headers={"Content-Type": BATCHES_MEDIA_TYPE},
        )
        if response.status_code == 204 or not response.content:
            return []
        return [
            BatchAck(
                Offset(b["base_offset"]),
                Offset(b["last_offset"]),
                TimestampMs(b.get("log_append_time", -1)),
                bool(b.get("duplicate", False)),
            )
            for b in orjson.loads(response.content)["batches"]
        ]

    def init_producer(
        self, producer_id: int | None = None, producer_epoch: int | None = None
    ) -> ProducerIdentity:
        """A new idempotent producer id, or a bumped epoch for an existing one (fencing it)."""
        body: dict[str, int] = {}
        if producer_id is not None:
            body = {"producer_id": producer_id, "producer_epoch": producer_epoch or 0}
        answer = self._request("POST", "/producers", json=body).json()
        return ProducerIdentity(
            ProducerId(answer["producer_id"]), ProducerEpoch(answer["producer_epoch"])
        )

    # -- fetch --------------------------------------------------------------------------------

    def _fetch_params(
        self, offset: int, max_bytes: int, max_wait_ms: int, max_records: int | None
    ) -> dict[str, str | int]:
        params: dict[str, str | int] = {
            "offset": offset,
            "max_bytes": max_bytes,
            "max_wait_ms": max_wait_ms,
        }
        if max_records is not None:
            params["max_records"] = max_records
        return params

    def fetch_batches(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1_048_576,
        max_wait_ms: int = 0,
    ) -> FetchedBatches:
        """Raw batches from ``offset`` on; long-polls up to ``max_wait_ms`` at the log end."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/records"
        response = self._request(
            "GET",
            path,
            params=self._fetch_params(offset, max_bytes, max_wait_ms, None),
            headers={"Accept": BATCHES_MEDIA_TYPE},
            timeout=self.timeout + max_wait_ms / 1000,
        )
        headers = response.headers
        return FetchedBatches(
            data=response.content,
            high_watermark=Offset(int(headers.get("Headwater-High-Watermark", -1))),
            log_start_offset=Offset(int(headers.get("Headwater-Log-Start-Offset", -1))),
            next_offset=Offset(int(headers.get("Headwater-Next-Offset", offset))),
        )

    def fetch_json(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1_048_576,
        max_wait_ms: int = 0,
        max_records: int | None = None,
        embedded: str = "json",
    ) -> list[dict[str, Any]]:
        """REST Proxy v2 shaped records at offsets >= ``offset``."""
        path = f"{self._topic_path(topic)}/partitions/{partition}/records"
        response = self._request(
            "GET",
            path,
            params=self._fetch_params(offset, max_bytes, max_wait_ms, max_records),
            headers={"Accept": BINARY_V2 if embedded == "binary" else JSON_V2},
            timeout=self.timeout + max_wait_ms / 1000,
        )
        records: list[dict[str, Any]] = orjson.loads(response.content)
        return records
