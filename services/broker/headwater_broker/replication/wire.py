"""The replica-fetch protocol on the wire: ``POST /replication/fetch``.

Request (``application/json``), one per follower and leader, for every partition it follows
there::

    {"replica_id": 2, "broker_epoch": 7, "max_wait_ms": 500, "min_bytes": 1,
     "max_bytes": 8388608,
     "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 3, "fetch_offset": 120,
                     "last_fetched_epoch": 2, "max_bytes": 1048576}]}

``replica_id`` and ``broker_epoch`` (the follower's registration) apply to every entry;
``fetch_offset`` is the follower's log end, ``last_fetched_epoch`` the leader epoch of its last
batch (-1 when it has none).

Answer (``application/vnd.headwater.replica-fetch``)::

    u32 big-endian  N, the length of the table
    N bytes         JSON: {"partitions": [{"topic", "partition", "error_code", "message",
                            "leader_epoch", "high_watermark", "log_start_offset",
                            "log_end_offset", "diverging": {"epoch", "end_offset"} | null,
                            "records_bytes"}]}
    ...             the raw batches of each entry, in table order, records_bytes each

Entries answer in request order. ``error_code`` 0 means none; otherwise it is a broker error code
(40904 FENCED_LEADER_EPOCH, 40905 UNKNOWN_LEADER_EPOCH, 41601 offset out of range, 42101 not
leader, 40907 stale broker epoch, ...) with ``message``. Batches are whole, as the leader stores
them, so a follower appends them unchanged.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

from headwater.errors import MalformedRequestError

MEDIA_TYPE = "application/vnd.headwater.replica-fetch"
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024
MAX_WAIT_MS = 30_000
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition of a replica fetch: where the follower's log ends and how it ends."""

    topic: str
    partition: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int = -1
    max_bytes: int = DEFAULT_PARTITION_MAX_BYTES


@dataclass(frozen=True, slots=True)
class ReplicaFetchRequest:
    replica_id: int
    broker_epoch: int
    partitions: list[FetchPartition]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = DEFAULT_MAX_BYTES

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "replica_id": self.replica_id,
                "broker_epoch": self.broker_epoch,
                "max_wait_ms": self.max_wait_ms,
                "min_bytes": self.min_bytes,
                "max_bytes": self.max_bytes,
                "partitions": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "leader_epoch": p.leader_epoch,
                        "fetch_offset": p.fetch_offset,
                        "last_fetched_epoch": p.last_fetched_epoch,
                        "max_bytes": p.max_bytes,
                    }
                    for p in self.partitions
                ],
            }
        )

    @classmethod
    def from_json(cls, body: bytes) -> ReplicaFetchRequest:
        """Parse and check a request body; MalformedRequestError (400 40002) naming the field."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedRequestError(f"replica fetch body is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise MalformedRequestError("replica fetch body must be a JSON object")
        replica_id = _int(doc, "replica_id", minimum=0)
        broker_epoch = _int(doc, "broker_epoch", minimum=0)
        max_wait_ms = _int(doc, "max_wait_ms", default=500, minimum=0, maximum=MAX_WAIT_MS)
        min_bytes = _int(doc, "min_bytes", default=1, minimum=0)
        max_bytes = _int(doc, "max_bytes", default=DEFAULT_MAX_BYTES, minimum=1)
        entries = doc.get("partitions")
        if not isinstance(entries, list):
            raise MalformedRequestError("replica fetch: 'partitions' must be a list")
        partitions: list[FetchPartition] = []
        seen: set[tuple[str, int]] = set()
        for i, entry in enumerate(entries):
            where = f"partitions[{i}]"
            if not isinstance(entry, dict):
                raise MalformedRequestError(f"replica fetch: {where} must be an object")
            topic = entry.get("topic")
            if not isinstance(topic, str) or not topic:
                raise MalformedRequestError(f"replica fetch: {where}.topic must be a string")
            partition = _int(entry, "partition", minimum=0, where=where)
            if (topic, partition) in seen:
                raise MalformedRequestError(
                    f"replica fetch: {where} repeats partition {topic}-{partition}"
                )
            seen.add((topic, partition))
            partitions.append(
                FetchPartition(
                    topic,
                    partition,
                    _int(entry, "leader_epoch", minimum=0, where=where),
                    _int(entry, "fetch_offset", minimum=0, where=where),
                    _int(entry, "last_fetched_epoch", default=-1, minimum=-1, where=where),
                    _int(
                        entry,
                        "max_bytes",
                        default=DEFAULT_PARTITION_MAX_BYTES,
                        minimum=1,
                        where=where,
                    ),
                )
            )
        return cls(replica_id, broker_epoch, partitions, max_wait_ms, min_bytes, max_bytes)


def _int(
    doc: dict[str, Any],
    key: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    where: str = "",
) -> int:
    name = f"{where}.{key}" if where else key
    value = doc.get(key, default)
    if value is None:
        raise MalformedRequestError(f"replica fetch: '{name}' is required")
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedRequestError(f"replica fetch: '{name}' must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise MalformedRequestError(f"replica fetch: '{name}' must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise MalformedRequestError(f"replica fetch: '{name}' must be <= {maximum}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class Diverging:
    """The leader's log diverges from the follower's: epoch ``epoch`` ends at ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """The leader's answer for one partition of a replica fetch."""

    topic: str
    partition: int
    error_code: int = 0
    message: str | None = None
    leader_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: Diverging | None = None
    # A view into the answer's body on the follower's side (appended without a copy).
    records: bytes | memoryview = field(default=b"", repr=False)

    def table_entry(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "error_code": self.error_code,
            "message": self.message,
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "diverging": (
                None
                if self.diverging is None
                else {"epoch": self.diverging.epoch, "end_offset": self.diverging.end_offset}
            ),
            "records_bytes": len(self.records),
        }


class MalformedFetchResponseError(ValueError):
    """A replica-fetch answer that does not follow the format (a follower drops it)."""


def encode_response(results: list[PartitionResult]) -> list[bytes | memoryview]:
    """The answer as chunks to send in order (batches are not copied into one buffer)."""
    table = orjson.dumps({"partitions": [r.table_entry() for r in results]})
    chunks: list[bytes | memoryview] = [_LENGTH.pack(len(table)) + table]
    chunks.extend(r.records for r in results if r.records)
    return chunks


def decode_response(body: bytes) -> list[PartitionResult]:
    """The per-partition results of an answer; MalformedFetchResponseError if it is not one."""
    if len(body) < _LENGTH.size:
        raise MalformedFetchResponseError(f"answer of {len(body)} bytes has no table length")
    (length,) = _LENGTH.unpack_from(body)
    start = _LENGTH.size + length
    if start > len(body):
        raise MalformedFetchResponseError(
            f"table of {length} bytes declared, {len(body) - _LENGTH.size} present"
        )
    try:
        table = orjson.loads(body[_LENGTH.size : start])
        entries = table["partitions"]
        results: list[PartitionResult] = []
        pos = start
        view = memoryview(body)
        for entry in entries:
            size = int(entry["records_bytes"])
            if size < 0 or pos + size > len(body):
                raise MalformedFetchResponseError(
                    f"{entry['topic']}-{entry['partition']}: {size} record bytes declared, "
                    f"{len(body) - pos} left"
                )
            div = entry.get("diverging")
            results.append(
                PartitionResult(
                    str(entry["topic"]),
                    int(entry["partition"]),
                    int(entry["error_code"]),
                    entry.get("message"),
                    int(entry["leader_epoch"]),
                    int(entry["high_watermark"]),
                    int(entry["log_start_offset"]),
                    int(entry["log_end_offset"]),
                    None if div is None else Diverging(int(div["epoch"]), int(div["end_offset"])),
                    view[pos : pos + size],
                )
            )
            pos += size
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, MalformedFetchResponseError):
            raise
        raise MalformedFetchResponseError(f"bad answer table: {exc!r}") from None
    if pos != len(body):
        raise MalformedFetchResponseError(f"{len(body) - pos} bytes after the last entry's batches")
    return results
