"""Paging of the registry's listings: an offset, then at most a limit (0 or less: no limit)."""

from __future__ import annotations

from headwater_registry.subjects import Page


def test_a_page_skips_offset_items_then_takes_limit() -> None:
    items = list(range(5))
    assert Page().of(items) == [0, 1, 2, 3, 4]
    assert Page(1, 2).of(items) == [1, 2]
    assert Page(3, 0).of(items) == [3, 4]
    assert Page(0, -1).of(items) == [0, 1, 2, 3, 4]
    assert Page(4, 5).of(items) == [4]
    assert Page(9, 1).of(items) == []
