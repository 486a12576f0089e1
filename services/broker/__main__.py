"""``python -m services.broker``: run one broker with settings from the BROKER_ environment."""

from __future__ import annotations

from headwater.service import serve
from services.broker.app import create_app
from services.broker.settings import BrokerSettings


def main() -> None:
    settings = BrokerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
