"""A TCP proxy that a test can partition: the network between one replica and PostgreSQL.

``partition()`` does what a lost route does, not what a closed port does: the connections
stay open but nothing crosses them any more, and a new connection is accepted and then never
answered, so the replica's queries hang until its own timeouts give up. ``heal()`` lets
traffic through again (what was held back flows on). One thread accepts, one thread per
connection pumps both ways; ``close()`` stops them all.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator

PUMP_TICK_S = 0.05  # how often an idle pump looks at the partition flag and the stop flag
CHUNK_BYTES = 65536


class PartitionableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        # Resolved once, here: a name lookup per connection would put the resolver (slow at
        # times on a container network) into every connection the replica makes.
        family, kind, proto, _name, address = socket.getaddrinfo(
            upstream_host, upstream_port, type=socket.SOCK_STREAM
        )[0]
        self.upstream = address
        self._upstream_kind = (family, kind, proto)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._open = threading.Event()  # set: traffic flows; clear: partitioned
        self._open.set()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._accepting.start()

    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def partition(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._stopped.set()
        self._open.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._accepting.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        self.listener.settimeout(PUMP_TICK_S)
        while not self._stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        # A connection made during a partition waits, unanswered, until it heals.
        while not self._open.wait(PUMP_TICK_S):
            if self._stopped.is_set():
                return
        server = socket.socket(*self._upstream_kind)
        try:
            server.settimeout(5)
            server.connect(self.upstream)
            server.settimeout(None)
        except OSError:
            server.close()
            client.close()
            return
        self._track(server)
        with contextlib.suppress(OSError):
            for _ in self._pump(client, server):
                if self._stopped.is_set():
                    break
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.close()

    def _pump(self, client: socket.socket, server: socket.socket) -> Iterator[None]:
        peers = {client: server, server: client}
        while True:
            yield
            if not self._open.is_set():
                self._open.wait(PUMP_TICK_S)  # partitioned: the bytes stay where they are
                continue
            readable, _, _ = select.select(list(peers), [], [], PUMP_TICK_S)
            for sock in readable:
                data = sock.recv(CHUNK_BYTES)
                if not data:
                    return
                peers[sock].sendall(data)
