"""``python -m headwater_coordinator``: serve on COORDINATOR_PORT (a private Redis if no URL)."""

from __future__ import annotations

from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from headwater_kernel.server import serve


def main() -> None:
    settings = CoordinatorSettings()
    app = create_app(settings)

    async def drain() -> None:
        # SIGTERM: stop expiring members while heartbeats are still answered; once this process
        # stops answering, they could not keep their sessions alive here.
        coordinator = getattr(app.state, "coordinator", None)
        if coordinator is not None:
            coordinator.stop_expiring()

    serve(app, settings, drain=drain)


if __name__ == "__main__":
    main()
