"""``python -m headwater_broker``: run one broker with settings from the BROKER_ environment."""

from __future__ import annotations

from headwater_broker.app import create_app
from headwater_broker.settings import BrokerSettings
from headwater_kernel.server import serve


def main() -> None:
    settings = BrokerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
