"""``python -m headwater_coordinator``: serve on COORDINATOR_PORT (a private Redis if no URL)."""

from __future__ import annotations

from headwater_coordinator.app import create_app
from headwater_coordinator.settings import CoordinatorSettings
from headwater_kernel.server import serve


def main() -> None:
    settings = CoordinatorSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
