"""``python -m headwater_registry``: serve the registry with settings from the environment."""

from __future__ import annotations

import gc

from headwater_kernel.server import serve
from headwater_registry.app import create_app
from headwater_registry.settings import RegistrySettings


def main() -> None:
    settings = RegistrySettings()
    app = create_app(settings)
    # The ~80,000 objects of the imported libraries live as long as the process: frozen out of
    # the collector, a full collection (set off as the schema caches grow) scans only what the
    # registry made since, instead of stalling every request for ~50 ms on this machine.
    gc.collect()
    gc.freeze()
    serve(app, settings)


if __name__ == "__main__":
    main()
