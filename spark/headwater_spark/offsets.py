"""Offset ranges of topic partitions: parsing offset options, splitting and limiting ranges.

Pure functions, used on the driver to plan Spark partitions (batch) and micro-batches (streaming).

Offset options follow Kafka's Spark source: ``"earliest"``, ``"latest"``, or JSON
``{"topic": {"0": 23, "1": -2}}`` where ``-2`` means earliest and ``-1`` latest. A streaming offset
(what Spark checkpoints) is the same JSON shape with concrete offsets only: per topic, per partition
(as a string key), the next offset to read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """A parsed ``startingOffsets`` / ``endingOffsets`` option.

    ``default`` (EARLIEST or LATEST) applies to partitions the JSON form does not name.
    """

    default: int
    per_partition: Mapping[TopicPartition, int]

    def resolve(self, tp: TopicPartition, beginning: Offset, end: Offset) -> Offset:
        """The concrete offset for ``tp`` given its current log range, clamped into it."""
        wanted = self.per_partition.get(tp, self.default)
        if wanted == EARLIEST:
            return beginning
        if wanted == LATEST:
            return end
        return Offset(min(max(wanted, beginning), end))


def parse_offset_spec(text: str | None, default: int) -> OffsetSpec:
    """Parse an offsets option; ``ValueError`` with the option's grammar when it is malformed."""
    if text is None or not text.strip():
        return OffsetSpec(default, {})
    word = text.strip().lower()
    if word == "earliest":
        return OffsetSpec(EARLIEST, {})
    if word == "latest":
        return OffsetSpec(LATEST, {})
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict):
        raise ValueError(
            f"offsets must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}, got {text!r}'
        )
    per_partition: dict[TopicPartition, int] = {}
    for topic, partitions in raw.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"offsets for topic {topic!r} must be an object of partition: offset")
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or not isinstance(offset, int) or offset < EARLIEST:
                raise ValueError(
                    f"bad offset {offset!r} for {topic}/{partition}: use an offset >= 0, "
                    "-2 (earliest) or -1 (latest)"
                )
            per_partition[(str(topic), PartitionId(int(partition)))] = offset
    return OffsetSpec(default, per_partition)


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
