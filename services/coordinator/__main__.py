"""``python -m services.coordinator``: serve on COORDINATOR_PORT; a private Redis if no URL."""

from __future__ import annotations

import contextlib
from pathlib import Path

from headwater.service import serve
from services.coordinator.app import create_app
from services.coordinator.redis_server import PrivateRedis
from services.coordinator.settings import CoordinatorSettings


def main() -> None:
    settings = CoordinatorSettings()
    with contextlib.ExitStack() as stack:
        if not settings.redis_url:
            private = stack.enter_context(PrivateRedis(Path(settings.data_dir)))
            settings = settings.model_copy(update={"redis_url": private.url})
        serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
