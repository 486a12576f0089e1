"""The record of source offset ranges already produced to an output topic, for idempotent re-runs.

A topic output cannot be overwritten the way a Parquet directory can, so the job remembers which
source ranges it has produced (after the produce of a range succeeded) and, when a range is
validated again, skips producing records inside a recorded range. The ledger is one JSON file per
output topic under the job's ``--state-dir``, written atomically (write a temporary file, then
rename) by the driver only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from headwater.types import Offset, PartitionId
from headwater_spark.offsets import OffsetRange


class RangeLedger:
    """Produced source ranges per output topic: ``{"source-topic": {"0": [[start, end], ...]}}``."""

    def __init__(self, state_dir: str | Path, output_topic: str) -> None:
        self.path = Path(state_dir) / f"produced-{output_topic}.json"
        self._ranges: dict[str, dict[str, list[list[int]]]] = {}
        if self.path.exists():
            self._ranges = json.loads(self.path.read_text())

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._ranges, sort_keys=True, indent=1))
        os.replace(tmp, self.path)


def _merge(spans: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
