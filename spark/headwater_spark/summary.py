"""The validation run's summary: counts per outcome, reason and writer schema id, samples of
invalid records, offsets covered, throughput, and the quality gate's verdict.

Built on the driver from a small aggregate (one row per topic, partition, outcome, reason and
writer schema id) and merged across micro-batches in streaming mode. Printed as a table; written
as JSON (to any Hadoop path, through :mod:`headwater_spark.files`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from headwater_spark.files import Files
from headwater_spark.validation import INVALID, VALID

SAMPLES_PER_SCHEMA = 5


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
    schema_id: int | None = None
    message: str | None = None  # the first invalid record's message: the summary's sample


@dataclass
class SchemaCounts:
    """Records written with one writer schema id (``None``: no readable id), and samples."""

    outcomes: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class QualityGate:
    """Most invalid records a run may have and still pass: a count, a ratio, or both."""

    max_invalid: int | None = None
    max_invalid_ratio: float | None = None

    def check(self, invalid: int, total: int) -> str | None:
        """Why the run fails the gate, or None when it passes."""
        if self.max_invalid is not None and invalid > self.max_invalid:
            return f"{invalid} invalid records, more than the {self.max_invalid} allowed"
        if (
            self.max_invalid_ratio is not None
            and total
            and invalid / total > self.max_invalid_ratio
        ):
            return (
                f"{invalid / total:.4%} of records invalid, more than the "
                f"{self.max_invalid_ratio:.4%} allowed"
            )
        return None


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
    schemas: dict[int | None, SchemaCounts] = field(default_factory=dict)
    gate: QualityGate | None = None

    @property
    def gate_failure(self) -> str | None:
        """Why the run fails its quality gate (None: passed, or no gate)."""
        if self.gate is None:
            return None
        return self.gate.check(self.outcomes.get(INVALID, 0), self.total)

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
            per_schema = self.schemas.setdefault(row.schema_id, SchemaCounts())
            per_schema.outcomes[row.outcome] = per_schema.outcomes.get(row.outcome, 0) + row.count
            if row.reason is not None:
                per_schema.reasons[row.reason] = per_schema.reasons.get(row.reason, 0) + row.count
                if len(per_schema.samples) < SAMPLES_PER_SCHEMA:
                    per_schema.samples.append(
                        {
                            "topic": row.topic,
                            "partition": row.partition,
                            "offset": row.first_offset,
                            "reason": row.reason,
                            "message": row.message,
                        }
                    )
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
            "schemas": [
                {
                    "schema_id": schema_id,
                    "outcomes": dict(sorted(counts.outcomes.items())),
                    "reasons": dict(sorted(counts.reasons.items())),
                    "samples": sorted(
                        counts.samples, key=lambda s: (s["topic"], s["partition"], s["offset"])
                    ),
                }
                for schema_id, counts in sorted(
                    self.schemas.items(), key=lambda item: (item[0] is None, item[0] or 0)
                )
            ],
            "gate": self._gate_json(),
            "outputs": self.outputs,
        }

    def _gate_json(self) -> dict[str, Any] | None:
        if self.gate is None:
            return None
        failure = self.gate_failure
        return {
            "max_invalid": self.gate.max_invalid,
            "max_invalid_ratio": self.gate.max_invalid_ratio,
            "passed": failure is None,
            "failure": failure,
        }

    def write(self, files: Files, path: str) -> None:
        files.write_text(path, json.dumps(self.to_json(), indent=2) + "\n")

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
        if any(counts.reasons for counts in self.schemas.values()):
            lines += ["", f"{'writer schema id':<22} {'valid':>8} {'invalid':>8}  first sample"]
            for schema_id, counts in sorted(
                self.schemas.items(), key=lambda item: (item[0] is None, item[0] or 0)
            ):
                sample = counts.samples[0] if counts.samples else None
                text = (
                    f"{sample['topic']}/{sample['partition']}@{sample['offset']} "
                    f"{sample['reason']}: {sample['message']}"
                    if sample
                    else ""
                )
                lines.append(
                    f"{'none' if schema_id is None else schema_id:<22} "
                    f"{counts.outcomes.get(VALID, 0):>8} {counts.outcomes.get(INVALID, 0):>8}  "
                    f"{text[:100]}"
                )
        lines += [
            "",
            f"{self.total} records in {self.elapsed_s:.2f} s "
            f"({self.records_per_second:,.0f} records/s, {self.batches} batch(es))",
        ]
        for name, value in sorted(self.outputs.items()):
            lines.append(f"{name}: {value}")
        if self.gate is not None:
            failure = self.gate_failure
            lines.append(f"quality gate: {'FAILED: ' + failure if failure else 'passed'}")
        return "\n".join(lines)
