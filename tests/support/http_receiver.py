"""A real HTTP endpoint on 127.0.0.1 for the notifications' tests: it records every request
(method, path, headers, body) and answers as the test says: a status, after a delay, or never.

It runs in threads of its own (``ThreadingHTTPServer``), so a daemon under test, a blocking
test and an event loop can all reach it; ``wait_for`` waits on a condition, not a sleep.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()


class Receiver:
    def __init__(self) -> None:
        self.status = 200
        self.delay_s = 0.0
        self.hang = False  # never answer (until the receiver closes)
        self.requests: list[Received] = []
        self._changed = threading.Condition()
        self._closing = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                receiver._record(Received("POST", self.path, headers, body, time.monotonic()))
                if receiver.hang:
                    receiver._closing.wait()
                    return
                if receiver.delay_s:
                    receiver._closing.wait(receiver.delay_s)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _record(self, received: Received) -> None:
        with self._changed:
            self.requests.append(received)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout_s: float = 20.0) -> list[Received]:
        """The first ``count`` requests, once they have come (``AssertionError`` after
        ``timeout_s``, naming how many did)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout_s):
                raise AssertionError(
                    f"{len(self.requests)} of {count} requests within {timeout_s:g}s: "
                    f"{[r.path for r in self.requests]}"
                )
            return list(self.requests[:count])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
