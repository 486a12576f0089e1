"""The registry's domain metrics (prometheus_client default registry; /metrics is central)."""

from __future__ import annotations

from prometheus_client import Counter

CACHE_HITS = Counter(
    "headwater_registry_cache_hits_total",
    "Lookups the registry answered from its in-process cache of immutable schema data.",
    ["cache"],
)
CACHE_MISSES = Counter(
    "headwater_registry_cache_misses_total",
    "Lookups of immutable schema data that had to read the database.",
    ["cache"],
)
