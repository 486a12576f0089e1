"""``python -m headwater_broker``: run one broker with settings from the BROKER_ environment.

Exits 1 when another process took this broker id over (the broker stops serving first). SIGTERM
is a controlled shutdown: leaderships move off the broker before it stops answering.
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

    app = create_app(settings, on_replaced=exit_replaced)
    # SIGTERM: leaderships move to other in-sync replicas while the broker still answers (421
    # naming the new leader), then it stops (docs/cluster.md, "Controlled shutdown").
    serve(app, settings, drain=app.state.broker.controlled_shutdown)


if __name__ == "__main__":
    main()
