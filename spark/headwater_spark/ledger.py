"""The record of source offset ranges already produced to an output topic, for idempotent re-runs.

A topic output cannot be overwritten the way a Parquet directory can, so the job remembers which
source ranges it has produced (after the produce of a range succeeded) and, when a range is
validated again, skips producing records inside a recorded range. The ledger is one JSON file per
output topic under the job's ``--state-dir``, which may be any Hadoop path (``s3a://``,
``hdfs://``, ``file://``) so an ephemeral driver pod does not lose it; it is written atomically
(:mod:`headwater_spark.files`) by the driver only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from headwater.types import Offset, PartitionId
from headwater_spark.files import Files
from headwater_spark.offsets import OffsetRange


class RangeLedger:
    """Produced source ranges per output topic: ``{"source-topic": {"0": [[start, end], ...]}}``."""

    def __init__(self, files: Files, state_dir: str, output_topic: str) -> None:
        self.files = files
        self.path = files.join(state_dir, f"produced-{output_topic}.json")
        text = files.read_text(self.path)
        self._ranges: dict[str, dict[str, list[list[int]]]] = json.loads(text) if text else {}

    def recorded(self) -> list[OffsetRange]:
        """Every recorded range (merged: no overlaps, sorted)."""
        return [
            OffsetRange(topic, PartitionId(int(p)), Offset(start), Offset(end))
            for topic, parts in sorted(self._ranges.items())
            for p, spans in sorted(parts.items(), key=lambda item: int(item[0]))
            for start, end in spans
        ]

    def record(self, ranges: Iterable[OffsetRange]) -> None:
        """Add ranges (merging adjacent and overlapping ones) and save the ledger atomically."""
        for r in ranges:
            if r.size == 0:
                continue
            spans = self._ranges.setdefault(r.topic, {}).setdefault(str(r.partition), [])
            spans.append([int(r.start), int(r.end)])
            spans[:] = _merge(spans)
        self.files.write_text(self.path, json.dumps(self._ranges, sort_keys=True, indent=1))


def _merge(spans: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
