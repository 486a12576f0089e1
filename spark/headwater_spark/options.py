"""Strict parsing of the ``headwater`` format's options, with Spark's Kafka source names.

Every option a reader or writer is given is checked here, on the driver, before anything is read
or written: a name the format does not know, or a value that does not parse, raises
:class:`OptionError` naming the option and, for unknown names, the closest valid one (so the typo
``startingOffset`` says ``did you mean 'startingOffsets'?`` instead of being ignored). Names are
matched case-insensitively, as Spark does for data source options.

The source's options are Spark's Kafka source's (``subscribe``, ``assign``, ``startingOffsets``,
``failOnDataLoss``, ...) plus ``brokers`` (an alias of ``kafka.bootstrap.servers``) and
``rowsPerBatch``; the sink's are Spark's Kafka sink's (``topic``, ``kafka.*`` producer settings).
Offsets themselves (their JSON, Kafka's rules against the log) are
:mod:`headwater_spark.offsets`'.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.config import broker_urls

__all__ = [
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
]


class OptionError(ValueError):
    """An option the format does not know, or one whose value does not parse."""


def _closest(name: str, known: list[str]) -> str:
    lowered = {k.lower(): k for k in known}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return f"; did you mean {lowered[matches[0]]!r}?" if matches else ""


def check_names(
    given: Mapping[str, str], known: list[str], what: str, kind: str = "option"
) -> dict[str, str]:
    """``given`` keyed by the canonical spelling of each known name; OptionError on the rest."""
    canonical = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    for name, value in given.items():
        key = canonical.get(name.lower())
        if key is None:
            raise OptionError(
                f"unknown {kind} {name!r} for the {what}{_closest(name, known)} "
                f"(valid: {', '.join(sorted(known, key=str.lower))})"
            )
        out[key] = value
    return out


def parse_bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {name}: expected true or false, got {raw!r}")
    return text == "true"


def parse_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name}: expected an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name}: must be >= {minimum}, got {value}")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(name: str, raw: str) -> int:
    """``maxTriggerDelay`` as Spark writes it: ``15m``, ``30s``, ``500ms`` (a bare number: ms)."""
    match = _DURATION.match(raw)
    if not match:
        raise OptionError(f"option {name}: expected a duration like 15m, 30s or 500ms, got {raw!r}")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]


def parse_brokers(name: str, raw: str) -> list[str]:
    """Comma-separated broker URLs, read as the clients read ``bootstrap.servers``."""
    try:
        return list(broker_urls(raw.split(",")))
    except ValueError as exc:
        raise OptionError(f"option {name}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a query reads: exactly one of Kafka's three ways of saying it.

    ``topics`` (``subscribe``), ``pattern`` (``subscribePattern``, a regular expression matched
    against whole topic names, re-evaluated at every micro-batch) or ``assigned`` (``assign``:
    fixed partitions per topic).
    """

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assigned:
            return f"assign {sorted(self.assigned)}"
        return f"subscribe {list(self.topics)}"


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name in options]
    if len(given) != 1:
        raise OptionError(
            "the headwater source needs exactly one of 'subscribe', 'subscribePattern' or "
            f"'assign' (given: {given or 'none'})"
        )
    name = given[0]
    raw = options[name]
    if name == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe: expected comma-separated topic names")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option subscribePattern: not a regular expression: {exc}") from None
        return Subscription(pattern=raw)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'option assign: expected JSON like {{"topicA": [0, 1]}}, got {raw!r}')
    assigned: list[tuple[str, int]] = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise OptionError(
                f"option assign: partitions of topic {topic!r} must be a list of integers >= 0"
            )
        assigned += [(str(topic), p) for p in partitions]
    return Subscription(assigned=tuple(sorted(set(assigned))))


SOURCE_OPTIONS = [
    "kafka.bootstrap.servers",
    "brokers",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "rowsPerBatch",
]
"""Every option the source takes: Spark's Kafka source's names, ``brokers``, ``rowsPerBatch``."""

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_ROWS_PER_BATCH = 50_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000

# Spark passes these itself (``path`` for load(path), the query's checkpoint to a stream's
# sink); they mean nothing here.
_SPARK_INTERNAL = ("path", "paths", "checkpointlocation")


def _brokers(options: Mapping[str, str], what: str) -> list[str]:
    if "kafka.bootstrap.servers" in options and "brokers" in options:
        raise OptionError("give 'kafka.bootstrap.servers' or its alias 'brokers', not both")
    for name in ("kafka.bootstrap.servers", "brokers"):
        if name in options:
            return parse_brokers(name, options[name])
    raise OptionError(f"the {what} needs option 'kafka.bootstrap.servers' (or 'brokers')")


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, parsed once on the driver (picklable: plain values only).

    Offset options stay text here; :mod:`headwater_spark.offsets` parses and checks them against
    the log when a query is planned. ``streaming`` selects the mode's rules: ending offsets are
    batch-only, as in Spark.
    """

    brokers: list[str]
    subscription: Subscription
    starting_offsets: str | None = None
    starting_timestamp: int | None = None
    starting_by_timestamp: str | None = None
    starting_timestamp_strategy: str = "error"
    ending_offsets: str | None = None
    ending_timestamp: int | None = None
    ending_by_timestamp: str | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    include_headers: bool = False
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        given: Mapping[str, str],
        *,
        streaming: bool,
        extra_names: tuple[str, ...] = (),
    ) -> SourceOptions:
        """Parse ``given``; ``extra_names`` are options of a format built on this one."""
        raw = {k: v for k, v in given.items() if k.lower() not in _SPARK_INTERNAL}
        options = check_names(raw, [*SOURCE_OPTIONS, *extra_names], "headwater source")
        if streaming:
            for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
                if name in options:
                    raise OptionError(f"option {name} is not valid in streaming queries")
        if options.get("startingOffsetsByTimestampStrategy", "error").lower() not in (
            "error",
            "latest",
        ):
            raise OptionError(
                "option startingOffsetsByTimestampStrategy: expected error or latest, got "
                f"{options['startingOffsetsByTimestampStrategy']!r}"
            )

        def number(name: str, minimum: int) -> int | None:
            return parse_int(name, options[name], minimum) if name in options else None

        def flag(name: str, default: bool) -> bool:
            return parse_bool(name, options[name]) if name in options else default

        max_trigger = number("maxOffsetsPerTrigger", 1)
        min_trigger = number("minOffsetsPerTrigger", 1)
        if max_trigger is not None and min_trigger is not None and min_trigger > max_trigger:
            raise OptionError(
                f"option minOffsetsPerTrigger ({min_trigger}) is larger than maxOffsetsPerTrigger "
                f"({max_trigger})"
            )
        return cls(
            brokers=_brokers(options, "headwater source"),
            subscription=parse_subscription(options),
            starting_offsets=options.get("startingOffsets"),
            starting_timestamp=number("startingTimestamp", 0),
            starting_by_timestamp=options.get("startingOffsetsByTimestamp"),
            starting_timestamp_strategy=options.get(
                "startingOffsetsByTimestampStrategy", "error"
            ).lower(),
            ending_offsets=options.get("endingOffsets"),
            ending_timestamp=number("endingTimestamp", 0),
            ending_by_timestamp=options.get("endingOffsetsByTimestamp"),
            fail_on_data_loss=flag("failOnDataLoss", True),
            max_offsets_per_trigger=max_trigger,
            min_offsets_per_trigger=min_trigger,
            max_trigger_delay_ms=(
                parse_duration_ms("maxTriggerDelay", options["maxTriggerDelay"])
                if "maxTriggerDelay" in options
                else DEFAULT_MAX_TRIGGER_DELAY_MS
            ),
            min_partitions=number("minPartitions", 1),
            max_records_per_partition=number("maxRecordsPerPartition", 1)
            or DEFAULT_MAX_RECORDS_PER_PARTITION,
            include_headers=flag("includeHeaders", False),
            rows_per_batch=number("rowsPerBatch", 1) or DEFAULT_ROWS_PER_BATCH,
            extra={k: v for k, v in options.items() if k in extra_names},
        )


# Producer settings a writer may pass as ``kafka.<key>`` (the SDK's Producer keys); the
# idempotent producer and acks=all are what the sink's guarantees rest on, so they are fixed.
PRODUCER_KEYS = [
    "linger.ms",
    "batch.size",
    "compression.type",
    "delivery.timeout.ms",
    "request.timeout.ms",
    "retries",
    "retry.backoff.ms",
    "buffer.memory",
    "max.block.ms",
    "client.id",
]
SINK_OPTIONS = [
    "kafka.bootstrap.servers",
    "brokers",
    "topic",
    "includeHeaders",
    *[f"kafka.{key}" for key in PRODUCER_KEYS],
]


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options: brokers, the default ``topic`` and producer settings."""

    brokers: list[str]
    topic: str | None
    producer: dict[str, str]

    @classmethod
    def parse(cls, given: Mapping[str, str]) -> SinkOptions:
        raw = {k: v for k, v in given.items() if k.lower() not in _SPARK_INTERNAL}
        options = check_names(raw, SINK_OPTIONS, "headwater sink")
        producer = {
            k.removeprefix("kafka."): v
            for k, v in options.items()
            if k.startswith("kafka.") and k[6:] in PRODUCER_KEYS
        }
        topic = options.get("topic")
        if topic is not None and not topic.strip():
            raise OptionError("option topic: expected a topic name")
        return cls(_brokers(options, "headwater sink"), topic, producer)

    def producer_config(self) -> dict[str, Any]:
        """The SDK Producer's configuration: idempotent, acks=all, plus the given settings."""
        return {
            "bootstrap.servers": ",".join(self.brokers),
            "enable.idempotence": True,
            "acks": "all",
            **self.producer,
        }
