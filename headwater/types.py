"""Distinct types for the identifiers that flow between services, so mypy keeps them apart."""

from __future__ import annotations

from typing import NewType

Offset = NewType("Offset", int)
"""A record's position in a partition: starts at 0, only grows, never reused."""

PartitionId = NewType("PartitionId", int)
BrokerId = NewType("BrokerId", int)
ProducerId = NewType("ProducerId", int)
ProducerEpoch = NewType("ProducerEpoch", int)
SequenceNumber = NewType("SequenceNumber", int)
"""A record's per-partition sequence number under an idempotent producer id."""
SchemaId = NewType("SchemaId", int)
MemberEpoch = NewType("MemberEpoch", int)
GroupEpoch = NewType("GroupEpoch", int)
TimestampMs = NewType("TimestampMs", int)
