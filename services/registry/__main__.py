"""``python -m services.registry``: serve the registry with settings from the environment."""

from __future__ import annotations

from headwater.service import serve
from services.registry.app import create_app
from services.registry.settings import RegistrySettings


def main() -> None:
    settings = RegistrySettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
