"""The bounded cache of immutable registry data: LRU eviction past capacity."""

from __future__ import annotations

from headwater_registry.cache import BoundedCache


def test_least_recently_used_entry_is_evicted() -> None:
    cache: BoundedCache[int, str] = BoundedCache(2)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache.get(1) == "a"  # 1 is now the most recently used
    cache.put(3, "c")
    assert (cache.get(1), cache.get(2), cache.get(3)) == ("a", None, "c")
    assert len(cache) == 2


def test_put_replaces_and_refreshes() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("x", 1)
    cache.put("y", 2)
    cache.put("x", 10)
    cache.put("z", 3)
    assert (cache.get("x"), cache.get("y"), cache.get("z")) == (10, None, 3)
