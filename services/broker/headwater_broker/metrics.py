"""The broker's domain metrics (prometheus_client default registry, served on ``/metrics``).

Labels are topic names and partition numbers -- bounded by the topics that exist; series of a
deleted topic are removed with it.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge

PRODUCE_BYTES = Counter(
    "headwater_broker_produce_bytes", "Record batch bytes appended, by topic.", ["topic"]
)
PRODUCE_RECORDS = Counter(
    "headwater_broker_produce_records", "Records appended, by topic.", ["topic"]
)
FETCH_BYTES = Counter(
    "headwater_broker_fetch_bytes", "Record batch bytes returned by fetches, by topic.", ["topic"]
)
FETCH_RECORDS = Counter(
    "headwater_broker_fetch_records", "Records returned by fetches, by topic.", ["topic"]
)
LOG_END_OFFSET = Gauge(
    "headwater_broker_log_end_offset",
    "Next offset to be written, by topic and partition.",
    ["topic", "partition"],
)
LOG_START_OFFSET = Gauge(
    "headwater_broker_log_start_offset",
    "First offset still readable (moves with retention), by topic and partition.",
    ["topic", "partition"],
)


def forget_topic(topic: str, partitions: int) -> None:
    """Drop a deleted topic's series."""
    for metric in (PRODUCE_BYTES, PRODUCE_RECORDS, FETCH_BYTES, FETCH_RECORDS):
        with contextlib.suppress(KeyError):
            metric.remove(topic)
    for p in range(partitions):
        for gauge in (LOG_END_OFFSET, LOG_START_OFFSET):
            with contextlib.suppress(KeyError):
                gauge.remove(topic, str(p))


def forget_partition(topic: str, partition: int) -> None:
    """Drop the series of a replica this broker no longer holds."""
    for gauge in (LOG_END_OFFSET, LOG_START_OFFSET):
        with contextlib.suppress(KeyError):
            gauge.remove(topic, str(partition))


# --- The cluster, as this broker's metadata image shows it -------------------------------------

ACTIVE_CONTROLLER = Gauge(
    "headwater_broker_active_controller", "1 if this broker is the active controller, else 0."
)
CONTROLLER_EPOCH = Gauge(
    "headwater_broker_controller_epoch", "The controller epoch in this broker's metadata."
)
FENCED_BROKERS = Gauge(
    "headwater_broker_fenced_brokers", "Registered brokers not active (fenced or shutting down)."
)
OFFLINE_PARTITIONS = Gauge(
    "headwater_broker_partitions_without_leader", "Partitions whose leader is -1 (offline)."
)


# --- Replication, as this broker's leaders see it ----------------------------------------------

UNDER_REPLICATED_PARTITIONS = Gauge(
    "headwater_broker_under_replicated_partitions",
    "Partitions this broker leads whose in-sync set is smaller than their replica list.",
)
UNDER_MIN_ISR_PARTITIONS = Gauge(
    "headwater_broker_under_min_isr_partitions",
    "Partitions this broker leads with fewer in-sync replicas than min.insync.replicas "
    "(acks=all writes are refused with 503 50303).",
)
FOLLOWER_LAG = Gauge(
    "headwater_broker_follower_lag_records",
    "Largest gap between this leader's log end and a follower's last fetch offset, by topic and "
    "partition (a follower that has not fetched in this leader epoch counts from 0).",
    ["topic", "partition"],
)
UNCLEAN_TRUNCATED_RECORDS = Counter(
    "headwater_broker_unclean_truncated_records_total",
    "Records this broker truncated from its replica below its high watermark: committed records "
    "(acknowledged with acks=all, visible to consumers) that an unclean leader election lost. "
    "Always 0 without unclean.leader.election.enable.",
    ["topic", "partition"],
)
