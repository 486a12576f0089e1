"""``python -m headwater_broker``: run one broker with settings from the BROKER_ environment.

Exits 1 when another process took this broker id over (the broker stops serving first).
"""

from __future__ import annotations

import os
import signal
import sys

from headwater_broker.app import create_app
from headwater_broker.settings import BrokerSettings
from headwater_kernel.server import serve


def main() -> None:
    settings = BrokerSettings()
    replaced: list[bool] = []

    def stop_replaced() -> None:
        replaced.append(True)
        os.kill(os.getpid(), signal.SIGTERM)

    serve(create_app(settings, on_replaced=stop_replaced), settings)
    if replaced:
        sys.exit(1)


if __name__ == "__main__":
    main()
