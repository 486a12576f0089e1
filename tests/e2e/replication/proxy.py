"""A TCP proxy on loopback that a test can sever and heal (test support for link faults).

Each accepted connection is relayed to ``127.0.0.1:target`` by two pump threads. ``sever()``
closes every relayed connection, and while severed a new connection is accepted and closed at
once (the client sees the peer go away, as with a reset); ``heal()`` relays again.
An end that closes its side is passed on as a half-close (what it sent last is still read).
``block(request)`` cuts only the connections whose client sends what ``request`` accepts.
``pause_after(accept, action)`` runs ``action`` once, right after relaying bytes that ``accept``
accepts: a test stops a process there -- a client between two statements of one database
transaction, a server that has just been sent a request -- without waiting for luck.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._ended: dict[int, int] = {}  # directions ended by EOF, per connection
        self._severed = False
        self._closed = threading.Event()
        self._trigger: tuple[Callable[[bytes], bool], Callable[[], None], bool] | None = None
        self.fired = threading.Event()
        self._block: Callable[[bytes], bool] | None = None
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def sever(self) -> None:
        with self._lock:
            self._severed = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def pause_after(
        self, accept: Callable[[bytes], bool], action: Callable[[], None], *, upward: bool = False
    ) -> None:
        """Once: run ``action`` right after relaying bytes that ``accept`` accepts -- from the
        server to the client, or with ``upward`` from the client to the server (``fired`` is
        set then)."""
        with self._lock:
            self._trigger = (accept, action, upward)
            self.fired.clear()

    def block(self, request: Callable[[bytes], bool] | None) -> None:
        """Cut every connection whose client sends bytes that ``request`` accepts, at those
        bytes (they are not relayed), now and later; ``None`` stops cutting. One client is cut
        off while the others are relayed: a follower's fetches, told by their replica id."""
        with self._lock:
            self._block = request

    def heal(self) -> None:
        with self._lock:
            self._severed = False

    def close(self) -> None:
        self._closed.set()
        self.sever()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                severed = self._severed
            if severed:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                if self._severed:
                    _close(client)
                    _close(upstream)
                    continue
                self._open.update((client, upstream))
            for source, sink, upward in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, sink, upward, id(client)), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upward: bool, key: int) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    # The peer closed its side: pass the FIN on, as a TCP path would, so that
                    # what it sent before closing (a server's last error message) is still
                    # read by the other end, and let the other direction finish on its own.
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                    with self._lock:
                        self._ended[key] = self._ended.get(key, 0) + 1
                        both = self._ended[key] == 2
                    if not both:
                        return
                    break
                block = self._block
                if upward and block is not None and block(data):
                    break
                sink.sendall(data)
                trigger = self._trigger
                if trigger is not None and trigger[2] == upward and trigger[0](data):
                    with self._lock:
                        trigger, self._trigger = self._trigger, None
                    if trigger is not None:
                        trigger[1]()
                        self.fired.set()
        except OSError:
            pass
        with self._lock:
            self._open.discard(source)
            self._open.discard(sink)
            self._ended.pop(key, None)
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
