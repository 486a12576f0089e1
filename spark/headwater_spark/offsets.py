"""Offset ranges of topic partitions: parsing offset options, splitting and limiting ranges.

Pure functions, used on the driver to plan Spark partitions (batch) and micro-batches (streaming).

Offset options follow Kafka's Spark source: ``"earliest"``, ``"latest"``, or JSON
``{"topic": {"0": 23, "1": -2}}`` where ``-2`` means earliest and ``-1`` latest. A streaming offset
(what Spark checkpoints) is the same JSON shape with concrete offsets only: per topic, per partition
(as a string key), the next offset to read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from headwater.types import Offset, PartitionId

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, PartitionId]
PartitionOffsets = dict[TopicPartition, Offset]
"""Concrete positions per topic partition (the next offset to read, or an exclusive end)."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: the unit of work of one Spark task."""

    topic: str
    partition: PartitionId
    start: Offset
    end: Offset

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class OffsetOptionError(ValueError):
    """An offset option that is malformed or that Kafka's rules refuse for this log."""


class DataLossError(RuntimeError):
    """Offsets a query needs are no longer in the log (retention moved its start past them), or
    a partition it read from is gone; raised only with ``failOnDataLoss`` true (the default)."""


DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in the log any more: retention "
    "deleted it, or the topic was deleted and recreated. If you want your query to go on "
    "anyway, set the source option failOnDataLoss to false."
)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed ``startingOffsets`` / ``endingOffsets`` (or by-timestamp) option.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``per_partition`` holds offsets, -2/-1
    allowed) or ``timestamps`` (``per_partition`` holds timestamps in ms, or ``timestamp`` one
    timestamp for every partition).
    """

    kind: str
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    @property
    def names_partitions(self) -> bool:
        return bool(self.per_partition)


def parse_offset_spec(text: str | None, default: int, name: str = "offsets") -> OffsetSpec:
    """Parse an offsets option; ``OffsetOptionError`` with the option's grammar when malformed."""
    if text is None or not text.strip():
        return OffsetSpec("earliest" if default == EARLIEST else "latest")
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)
    return OffsetSpec("offsets", _partition_json(name, text, EARLIEST))


def parse_timestamp_spec(text: str, name: str) -> OffsetSpec:
    """``{"topic": {"0": 1700000000000}}``: a timestamp (ms) per partition."""
    return OffsetSpec("timestamps", _partition_json(name, text, 0))


def _partition_json(name: str, text: str, minimum: int) -> dict[TopicPartition, int]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raw = None
    what = "an offset >= 0, -2 (earliest) or -1 (latest)" if minimum < 0 else "a timestamp >= 0"
    if not isinstance(raw, dict) or not raw:
        raise OffsetOptionError(
            f"option {name}: expected 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}, got {text!r}'
            if minimum < 0
            else f'option {name}: expected JSON like {{"topic": {{"0": 1700000000000}}}}, '
            f"got {text!r}"
        )
    per_partition: dict[TopicPartition, int] = {}
    for topic, partitions in raw.items():
        if not isinstance(partitions, dict):
            raise OffsetOptionError(
                f"option {name}: the value for topic {topic!r} must be an object of "
                "partition: offset"
            )
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise OffsetOptionError(
                    f"option {name}: partition {partition!r} of topic {topic!r} is not a number"
                )
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < minimum:
                raise OffsetOptionError(
                    f"option {name}: bad value {offset!r} for {topic}/{partition}: use {what}"
                )
            per_partition[(str(topic), PartitionId(int(partition)))] = offset
    return per_partition


LogRanges = Mapping[TopicPartition, tuple[Offset, Offset]]
"""``(beginning, end)`` per partition: the first offset still stored and the next to be written."""

TimestampLookup = Callable[[TopicPartition, int], Offset | None]
"""The first offset of a partition whose record timestamp is >= the given one (None: none)."""


def _check_named(name: str, spec: OffsetSpec, ranges: LogRanges) -> None:
    """Kafka's rule: JSON offsets name every partition the query reads, and only those."""
    if not spec.names_partitions:
        return
    named, present = set(spec.per_partition), set(ranges)
    if named != present:
        missing = sorted(present - named)
        unknown = sorted(named - present)
        parts = []
        if missing:
            parts.append(f"missing {[f'{t}/{p}' for t, p in missing]}")
        if unknown:
            parts.append(f"not read by this query {[f'{t}/{p}' for t, p in unknown]}")
        raise OffsetOptionError(
            f"option {name} must name every partition the query reads, and only those "
            f"({'; '.join(parts)}); use -2 for earliest and -1 for latest"
        )


def resolve_starts(
    spec: OffsetSpec,
    ranges: LogRanges,
    lookup: TimestampLookup,
    *,
    batch: bool,
    fail_on_data_loss: bool,
    timestamp_strategy: str = "error",
    name: str = "startingOffsets",
) -> PartitionOffsets:
    """Concrete start offsets per partition, validated as Kafka's source validates them."""
    if batch and spec.kind == "latest":
        raise OffsetOptionError(f"option {name}=latest is not valid for batch queries")
    _check_named(name, spec, ranges)
    out: PartitionOffsets = {}
    for tp, (beginning, end) in sorted(ranges.items()):
        wanted = _wanted(spec, tp, lookup, name, end, timestamp_strategy)
        if wanted == EARLIEST:
            out[tp] = beginning
        elif wanted == LATEST:
            if batch:
                raise OffsetOptionError(
                    f"option {name}: -1 (latest) for {tp[0]}/{tp[1]} is not valid for batch queries"
                )
            out[tp] = end
        elif wanted < beginning:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{name}: offset {wanted} of {tp[0]}/{tp[1]} is before the log start "
                    f"{beginning} (the log holds [{beginning}, {end})). {DATA_LOSS_HINT}"
                )
            out[tp] = beginning
        elif wanted > end:
            raise OffsetOptionError(
                f"option {name}: offset {wanted} of {tp[0]}/{tp[1]} is past the log end {end} "
                f"(the log holds [{beginning}, {end}))"
            )
        else:
            out[tp] = Offset(wanted)
    return out


def resolve_ends(
    spec: OffsetSpec,
    ranges: LogRanges,
    lookup: TimestampLookup,
    *,
    fail_on_data_loss: bool,
    name: str = "endingOffsets",
) -> PartitionOffsets:
    """Concrete (exclusive) end offsets per partition of a batch query, validated as Kafka's."""
    if spec.kind == "earliest":
        raise OffsetOptionError(f"option {name}=earliest is not valid for batch queries")
    _check_named(name, spec, ranges)
    out: PartitionOffsets = {}
    for tp, (beginning, end) in sorted(ranges.items()):
        # No record at or after an ending timestamp: the query reads to the end, as Kafka's.
        wanted = _wanted(spec, tp, lookup, name, end, "latest")
        if wanted == LATEST:
            out[tp] = end
        elif wanted == EARLIEST:
            raise OffsetOptionError(
                f"option {name}: -2 (earliest) for {tp[0]}/{tp[1]} is not valid as an ending offset"
            )
        elif wanted > end:
            raise OffsetOptionError(
                f"option {name}: offset {wanted} of {tp[0]}/{tp[1]} is past the log end {end} "
                f"(the log holds [{beginning}, {end}))"
            )
        elif wanted < beginning:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{name}: offset {wanted} of {tp[0]}/{tp[1]} is before the log start "
                    f"{beginning}. {DATA_LOSS_HINT}"
                )
            out[tp] = beginning
        else:
            out[tp] = Offset(wanted)
    return out


def _wanted(
    spec: OffsetSpec,
    tp: TopicPartition,
    lookup: TimestampLookup,
    name: str,
    end: Offset,
    strategy: str,
) -> int:
    if spec.kind == "earliest":
        return EARLIEST
    if spec.kind == "latest":
        return LATEST
    if spec.kind == "offsets":
        return spec.per_partition[tp]
    timestamp = spec.timestamp if spec.timestamp is not None else spec.per_partition[tp]
    found = lookup(tp, timestamp)
    if found is not None:
        return found
    if strategy == "latest":
        return end
    raise OffsetOptionError(
        f"option {name}: {tp[0]}/{tp[1]} has no record at or after timestamp {timestamp}; "
        "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
    )


def check_order(starts: PartitionOffsets, ends: PartitionOffsets) -> None:
    """Kafka's last check of a batch range: no start after its end."""
    for tp, start in sorted(starts.items()):
        if start > ends[tp]:
            raise OffsetOptionError(
                f"starting offset {start} of {tp[0]}/{tp[1]} is after its ending offset {ends[tp]}"
            )


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpointed form: ``{"topic": {"0": next_offset}}`` with sorted keys."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_offsets(raw: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """Inverse of :func:`to_json_offsets`."""
    return {
        (topic, PartitionId(int(p))): Offset(int(o))
        for topic, parts in raw.items()
        for p, o in parts.items()
    }


def split_ranges(
    ranges: Iterable[OffsetRange], max_records: int, min_splits: int = 1
) -> list[OffsetRange]:
    """Cut ranges so none holds more than ``max_records`` and there are >= ``min_splits`` pieces.

    Empty ranges are dropped. Pieces of one range are contiguous, non-overlapping and cover it
    exactly, sizes differing by at most one, so Spark tasks get even work. When the count is
    still below ``min_splits`` (few, small partitions), the largest piece is halved repeatedly
    while it has more than one record.
    """
    if max_records < 1:
        raise ValueError("max_records must be >= 1")
    pieces: list[OffsetRange] = []
    for r in ranges:
        if r.size == 0:
            continue
        count = -(-r.size // max_records)
        pieces.extend(_even_pieces(r, count))
    while len(pieces) < min_splits:
        largest = max(pieces, key=lambda piece: piece.size, default=None)
        if largest is None or largest.size < 2:
            break
        at = pieces.index(largest)
        pieces[at : at + 1] = _even_pieces(largest, 2)
    return sorted(pieces, key=lambda piece: (piece.topic, piece.partition, piece.start))


def _even_pieces(r: OffsetRange, count: int) -> list[OffsetRange]:
    base, extra = divmod(r.size, count)
    out = []
    start: int = r.start
    for i in range(count):
        end = start + base + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, Offset(start), Offset(end)))
        start = end
    return out


def limit_ends(
    start: PartitionOffsets, available: PartitionOffsets, max_records: int
) -> PartitionOffsets:
    """End offsets for a micro-batch reading at most ``max_records`` past ``start`` in total.

    The budget is shared fairly: partitions with less pending than an even share take all of it,
    the rest split what remains (the lowest partitions get the remainder), so one busy partition
    cannot starve the others. Partitions absent from ``start`` start at their available end
    (nothing pending) only if absent from ``available`` too; callers seed new partitions first.
    """
    pending = {tp: max(0, available[tp] - start.get(tp, available[tp])) for tp in available}
    ends: PartitionOffsets = {tp: start.get(tp, available[tp]) for tp in available}
    budget = max_records
    remaining = sorted(pending, key=lambda tp: (pending[tp], tp))
    while remaining and budget > 0:
        share = budget // len(remaining)
        smallest = remaining[0]
        if pending[smallest] <= share:
            ends[smallest] = Offset(ends[smallest] + pending[smallest])
            budget -= pending[smallest]
            remaining.pop(0)
            continue
        # Every remaining partition has more than an even share pending: split the budget.
        extra = budget - share * len(remaining)
        for i, tp in enumerate(sorted(remaining)):
            ends[tp] = Offset(ends[tp] + share + (1 if i < extra else 0))
        budget = 0
    return ends
