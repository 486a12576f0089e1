"""REST Proxy v2 embedded formats: produce bodies decoded to records, fetched records rendered.

In the ``json`` format (``application/vnd.kafka.json.v2+json`` and plain JSON) a key or value is
any JSON value, stored as its JSON text, and a header value is a string stored as UTF-8; in the
``binary`` format (``application/vnd.kafka.binary.v2+json``) keys, values and header values are
base64 strings of the stored bytes. ``null`` is a null key, a tombstone or a null header value.

Reading never alters data: a stored key or value that is not JSON (or a header value that is not
UTF-8) cannot be shown in the json format, so the answer stops before that record, and a fetch
starting at it is refused with 406 40602 naming the offset (as REST Proxy refuses with an error
rather than guess); the binary format shows every record.
A produce body::

    {"records": [{"key": ..., "value": ..., "partition": 0, "headers": [{"key": "k",
                  "value": ...}]}, ...]}

Decoding checks the body's shape; where each record may go (does the partition exist?) is the
broker's to judge.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from headwater.errors import (
    EmbeddedFormatError,
    EmptyProduceError,
    InvalidRecordError,
    MalformedRequestError,
)
from headwater.records.batch import Record
from headwater_broker.appends import ProducerRecord

EmbeddedFormat = Literal["json", "binary"]


@dataclass(frozen=True, slots=True)
class ProduceBody:
    """A produce request's body in one embedded format: a :class:`RecordSource` for the broker.

    Decoding waits until the broker asks, after it has checked the topic, so a request to a
    missing topic is answered 40401 whatever its body holds.
    """

    body: bytes
    format: EmbeddedFormat

    def decode(self) -> list[ProducerRecord]:
        return decode_records(self.body, self.format)


def _from_b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidRecordError(f"{what} must be a base64 string in the binary format")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRecordError(f"{what} is not valid base64") from None


def decode_records(body: bytes, fmt: EmbeddedFormat) -> list[ProducerRecord]:
    """A REST Proxy v2 produce body as records, in request order.

    No records (an empty or null body, ``{}``, ``{"records": []}``) is 422 422 as REST Proxy's;
    JSON that does not parse 400 40002; a bad record 422 42205.
    """
    if not body.strip():
        raise EmptyProduceError(
            'records may not be empty: the body is empty, expected {"records": [...]}'
        )
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedRequestError(f"Malformed JSON in request body: {exc}") from None
    if request is not None and not isinstance(request, dict):
        raise InvalidRecordError('The body must be an object: {"records": [...]}')
    records = None if request is None else request.get("records")
    if records is None or records == []:
        raise EmptyProduceError(
            'records may not be empty: expected {"records": [...]} with at least one record'
        )
    if not isinstance(records, list):
        raise InvalidRecordError('records must be a list: expected {"records": [...]}')
    decoded = []
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise InvalidRecordError(f"records[{i}] must be an object")
        unknown = set(record) - {"key", "value", "partition", "headers"}
        if unknown:
            raise InvalidRecordError(f"records[{i}] has unknown field(s): {sorted(unknown)}")
        partition = record.get("partition")
        if partition is not None and (
            isinstance(partition, bool) or not isinstance(partition, int) or partition < 0
        ):
            raise InvalidRecordError(f"records[{i}].partition must be a non-negative integer")
        key, value = record.get("key"), record.get("value")
        if fmt == "json":
            key_bytes = None if key is None else orjson.dumps(key)
            value_bytes = None if value is None else orjson.dumps(value)
        else:
            key_bytes = None if key is None else _from_b64(key, f"records[{i}].key")
            value_bytes = None if value is None else _from_b64(value, f"records[{i}].value")
        headers: list[tuple[str, bytes | None]] = []
        raw_headers = record.get("headers") or []
        if not isinstance(raw_headers, list):
            raise InvalidRecordError(f"records[{i}].headers must be a list")
        for j, header in enumerate(raw_headers):
            where = f"records[{i}].headers[{j}]"
            if not isinstance(header, dict) or not isinstance(header.get("key"), str):
                raise InvalidRecordError(f"{where} must be {{'key': str, 'value': str|null}}")
            hvalue = header.get("value")
            if hvalue is None:
                headers.append((header["key"], None))
            elif fmt == "binary":
                headers.append((header["key"], _from_b64(hvalue, f"{where}.value")))
            elif isinstance(hvalue, str):
                headers.append((header["key"], hvalue.encode()))
            else:
                raise InvalidRecordError(f"{where}.value must be a string or null")
        decoded.append(ProducerRecord(partition, key_bytes, value_bytes, headers))
    return decoded


class _NotShowableError(Exception):
    """The part of a record that the json format cannot carry (``"its value is not JSON"``)."""


def _json_value(data: bytes | None, what: str) -> Any:
    """Embedded json format: the stored JSON value, parsed; bytes that are not JSON raise."""
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        preview = data[:16].hex(" ") + (" ..." if len(data) > 16 else "")
        raise _NotShowableError(f"its {what} is not JSON ({len(data)} bytes: {preview})") from None


def _header_text(key: str, data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _NotShowableError(f"the value of its header {key!r} is not UTF-8 text") from None


def _to_b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _record(topic: str, partition: int, r: Record, binary: bool) -> dict[str, Any]:
    if binary:
        key, value = _to_b64(r.key), _to_b64(r.value)
        headers = [{"key": k, "value": _to_b64(v)} for k, v in r.headers]
    else:
        key, value = _json_value(r.key, "key"), _json_value(r.value, "value")
        headers = [{"key": k, "value": _header_text(k, v)} for k, v in r.headers]
    return {
        "topic": topic,
        "key": key,
        "value": value,
        "partition": partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "headers": headers,
    }


@dataclass(frozen=True, slots=True)
class RenderedRecords:
    """Fetched records as REST Proxy v2 JSON, and where the answer stopped early (if it did)."""

    body: list[dict[str, Any]]
    stopped_at: int | None  # offset of the first record the format cannot show


def render_records(
    topic: str, partition: int, records: list[Record], binary: bool
) -> RenderedRecords:
    """REST Proxy v2 consumer records; binary = base64 keys, values and header values.

    In the json format the answer ends before the first record that is not JSON; when that is
    the first record, :class:`EmbeddedFormatError` (406 40602) says which one and what to do.
    """
    body: list[dict[str, Any]] = []
    for r in records:
        try:
            body.append(_record(topic, partition, r, binary))
        except _NotShowableError as exc:
            if body:
                return RenderedRecords(body, r.offset)
            raise EmbeddedFormatError(
                f"The record at offset {r.offset} of {topic}/{partition} cannot be shown in the "
                f"json embedded format: {exc}. Fetch it with Accept: "
                f"application/vnd.kafka.binary.v2+json (base64), or skip it from offset "
                f"{r.offset + 1}"
            ) from None
    return RenderedRecords(body, None)
