"""``python -m headwater_broker``: run one broker with settings from the BROKER_ environment.

Exits 1 when another process took this broker id over (the broker stops serving first).
"""

from __future__ import annotations

import os

from headwater_broker.app import create_app
from headwater_broker.settings import BrokerSettings
from headwater_kernel.server import serve


def main() -> None:
    settings = BrokerSettings()

    def exit_replaced() -> None:
        # The broker has closed its logs; another process serves this id now.
        os._exit(1)

    serve(create_app(settings, on_replaced=exit_replaced), settings)


if __name__ == "__main__":
    main()
