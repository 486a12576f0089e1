"""The validation run's summary: counts per outcome and reason, offsets covered, throughput.

Built on the driver from a small aggregate (one row per topic, partition, outcome and reason) and
merged across micro-batches in streaming mode. Printed as a table; written as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater_spark.validation import INVALID, VALID


@dataclass(frozen=True, slots=True)
class CountRow:
    """One aggregate row: records of one (topic, partition, outcome, reason) and their offsets."""

    topic: str
    partition: int
    outcome: str
    reason: str | None
    count: int
    first_offset: int
    last_offset: int


@dataclass
class PartitionSpan:
    """Offsets of one partition the run validated (inclusive) and how many records."""

    first_offset: int
    last_offset: int
    records: int


@dataclass
class Summary:
    """What a run did. ``elapsed_s`` covers reading, validating and writing every output."""

    outcomes: dict[str, int] = field(default_factory=lambda: {VALID: 0, INVALID: 0})
    reasons: dict[str, int] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionSpan] = field(default_factory=dict)
    elapsed_s: float = 0.0
    batches: int = 0
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    @property
    def records_per_second(self) -> float:
        return self.total / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def add(self, rows: Iterable[CountRow]) -> None:
        """Fold in one aggregate (a whole batch run, or one micro-batch)."""
        for row in rows:
            self.outcomes[row.outcome] = self.outcomes.get(row.outcome, 0) + row.count
            if row.reason is not None:
                self.reasons[row.reason] = self.reasons.get(row.reason, 0) + row.count
            key = (row.topic, row.partition)
            span = self.partitions.get(key)
            if span is None:
                self.partitions[key] = PartitionSpan(row.first_offset, row.last_offset, row.count)
            else:
                span.first_offset = min(span.first_offset, row.first_offset)
                span.last_offset = max(span.last_offset, row.last_offset)
                span.records += row.count
        self.batches += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.total,
            "outcomes": dict(sorted(self.outcomes.items())),
            "reasons": dict(sorted(self.reasons.items())),
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "first_offset": span.first_offset,
                    "last_offset": span.last_offset,
                    "records": span.records,
                }
                for (topic, partition), span in sorted(self.partitions.items())
            ],
            "elapsed_seconds": round(self.elapsed_s, 3),
            "records_per_second": round(self.records_per_second, 1),
            "batches": self.batches,
            "outputs": self.outputs,
        }

    def write(self, path: str | Path) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def table(self) -> str:
        """The summary as aligned text tables, for a terminal."""
        lines = [f"{'outcome':<16} {'records':>8}"]
        for outcome, count in sorted(self.outcomes.items()):
            lines.append(f"{outcome:<16} {count:>8}")
        lines.append(f"{'total':<16} {self.total:>8}")
        if self.reasons:
            lines += ["", f"{'reason':<22} {'records':>8}"]
            for reason, count in sorted(self.reasons.items()):
                lines.append(f"{reason:<22} {count:>8}")
        if self.partitions:
            lines += ["", f"{'topic/partition':<28} {'first':>8} {'last':>9} {'records':>9}"]
            for (topic, partition), span in sorted(self.partitions.items()):
                name = f"{topic}/{partition}"
                lines.append(
                    f"{name:<28} {span.first_offset:>8} {span.last_offset:>9} {span.records:>9}"
                )
        lines += [
            "",
            f"{self.total} records in {self.elapsed_s:.2f} s "
            f"({self.records_per_second:,.0f} records/s, {self.batches} batch(es))",
        ]
        for name, value in sorted(self.outputs.items()):
            lines.append(f"{name}: {value}")
        return "\n".join(lines)
