"""``python -m services.coordinator``: serve on COORDINATOR_PORT (a private Redis if no URL)."""

from __future__ import annotations

from headwater.service import serve
from services.coordinator.app import create_app
from services.coordinator.settings import CoordinatorSettings


def main() -> None:
    settings = CoordinatorSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
