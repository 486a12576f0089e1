"""``BootstrapServers``: one broker client per URL of ``bootstrap.servers``, and which one is used.

Any broker answers any request (fetches by offset, produce, metadata), so a producer or consumer
sends everything to the current broker and moves to the next URL when a request meets a
connection error. Moving on is a plain counter: two threads that both rotate after one failure
skip a broker, which the next failure corrects.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from headwater.client.broker import BrokerClient
from headwater.closeable import Closeable


class BootstrapServers(Closeable):
    """The brokers of ``urls`` as clients; :attr:`current` until :meth:`rotate` moves on."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
        client_id: str,
        max_connections: int = 16,
    ) -> None:
        self._clients = [
            BrokerClient(
                url,
                timeout=timeout,
                transport=transport,
                client_id=client_id,
                max_connections=max_connections,
            )
            for url in urls
        ]
        self._index = 0

    @property
    def current(self) -> BrokerClient:
        return self._clients[self._index % len(self._clients)]

    def rotate(self) -> None:
        """Use the next broker (after a connection error on the current one)."""
        self._index += 1

    def __len__(self) -> int:
        return len(self._clients)

    def close(self) -> None:
        for client in self._clients:
            client.close()
