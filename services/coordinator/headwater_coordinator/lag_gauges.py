"""The consumer lag gauges: per-partition and per-group lag, refreshed in the background."""

from __future__ import annotations

import asyncio
import logging

from headwater.groups.errors import GroupNotFoundError
from headwater_coordinator import metrics
from headwater_coordinator.coordinator import Coordinator

log = logging.getLogger("headwater.coordinator")


class LagGauges:
    """Keeps ``headwater_coordinator_consumer_lag`` and ``..._group_lag`` current.

    The scrape only reads the gauges; broker calls happen here, every interval. Only the
    series this object set are removed, so several apps in one process (tests) coexist.
    """

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        # group -> (topic, partition label) series exported for it
        self._series: dict[str, set[tuple[str, str]]] = {}
        self._failing = False

    async def refresh(self) -> None:
        """Recompute every group; a group whose lag cannot be computed keeps its last values."""
        errors: list[str] = []
        try:
            group_ids = await self.coordinator.group_ids()
        except Exception as exc:
            self._report([f"listing groups: {type(exc).__name__}: {exc}"])
            return
        alive: set[str] = set()
        for group_id in group_ids:
            try:
                lag = await self.coordinator.lag(group_id, fresh=False)
            except GroupNotFoundError:
                continue  # deleted or expired since the listing: its series go below
            except Exception as exc:
                errors.append(f"{group_id}: {type(exc).__name__}: {exc}")
                alive.add(group_id)
                continue
            alive.add(group_id)
            series = {(row.topic, str(row.partition)) for row in lag.partitions}
            for row in lag.partitions:
                metrics.CONSUMER_LAG.labels(group_id, row.topic, str(row.partition)).set(row.lag)
            for topic, partition in self._series.get(group_id, set()) - series:
                metrics.CONSUMER_LAG.remove(group_id, topic, partition)
            metrics.GROUP_LAG.labels(group_id).set(lag.total_lag)
            self._series[group_id] = series
        for group_id in set(self._series) - alive:
            self._forget(group_id)
        self._report(errors)

    def _forget(self, group_id: str) -> None:
        for topic, partition in self._series.pop(group_id):
            metrics.CONSUMER_LAG.remove(group_id, topic, partition)
        metrics.GROUP_LAG.remove(group_id)

    def _report(self, errors: list[str]) -> None:
        # One warning when refreshes start failing, not one per interval while a broker is down.
        if errors and not self._failing:
            log.warning("consumer lag gauges keep their last values: %s", "; ".join(errors[:5]))
        elif not errors and self._failing:
            log.info("consumer lag gauges refresh again")
        self._failing = bool(errors)

    def clear(self) -> None:
        """Remove every series this object exported (at shutdown)."""
        for group_id in list(self._series):
            self._forget(group_id)

    async def run(self, interval_s: float) -> None:
        """Refresh forever; every coordinator process runs one (dashboards take max())."""
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consumer lag refresh failed")
            await asyncio.sleep(interval_s)
