"""The coordinator's domain metrics (prometheus_client, default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

HEARTBEATS = Counter(
    "headwater_coordinator_heartbeats_total", "Heartbeats handled (joins and leaves included)"
)
JOINS = Counter("headwater_coordinator_member_joins_total", "Members that joined a group")
EXPIRATIONS = Counter(
    "headwater_coordinator_member_expirations_total",
    "Members removed for missing their session or revocation deadline",
)
REBALANCES = Counter(
    "headwater_coordinator_rebalances_total", "Target assignments computed (group epoch bumps)"
)
OFFSET_COMMITS = Counter(
    "headwater_coordinator_offset_commits_total", "Partition offsets committed"
)
GROUP_MEMBERS = Gauge(
    "headwater_coordinator_group_members",
    "Members of a group as last seen by this process",
    ["group"],
)
# Lag gauges are refreshed by a background task (headwater_coordinator.lag_gauges), never
# computed in the scrape. Every coordinator process exports its own copy: dashboards take max().
CONSUMER_LAG = Gauge(
    "headwater_coordinator_consumer_lag",
    "Records between a group's committed offset (or the log beginning) and the log end",
    ["group", "topic", "partition"],
)
GROUP_LAG = Gauge(
    "headwater_coordinator_group_lag",
    "Total records a group lags behind the log ends of its partitions",
    ["group"],
)
