"""The thin client's connection to the daemon: the socket, peer-checked before the request is
sent, and the answer lines read from it (a batch's lines with their header); a finished one
left for the process's exit to close. Standard library only, as the client (``client``).
"""

from __future__ import annotations

import _socket
import os
import time

from daemon.wire.peer import trust_server
from daemon.wire.protocol import (
    DEFAULT_SOCKET,
    EVENT_OUTPUT,
    Request,
    decode_event,
    encode_request,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

CONNECT_TIMEOUT_S = 5.0
RECV_BYTES = 256 * 1024


def socket_path_from_env() -> str:
    """The socket path, from ``RUNBROKER_SOCKET``: the one variable the client reads (the full
    settings module is the daemon's and too slow to load here)."""
    return os.environ.get("RUNBROKER_SOCKET") or DEFAULT_SOCKET


class Unreachable(Exception):
    pass


# The daemon's peer check refused this user: as unusable as a socket it cannot open (69).
FORBIDDEN_TEXT = "refused: permission denied (the daemon serves its own user and root)"


# Sockets of finished connections that the process's exit closes (``leave_sockets_to_exit``).
_left_to_exit: list[_socket.socket] | None = None


def leave_sockets_to_exit() -> None:
    """From now on a finished connection's socket is not closed but left open for the process's
    exit, which the ``runbroker`` command then takes with ``os._exit`` (``left_sockets``).

    Why: as PID 1 the daemon's exit kills every process of the container, and the daemon exits
    once its last client has closed. A client that closed its socket and then spent a moment in
    the interpreter's teardown could be killed in that moment, and ``docker exec`` would report
    -9 instead of the run's status. A socket closed by the kernel's exit is closed after the
    exit status is fixed. Only the command's entry point calls this, never a library user."""
    global _left_to_exit
    if _left_to_exit is None:
        _left_to_exit = []


def left_sockets() -> int:
    """How many sockets wait for the process's exit to close them."""
    return len(_left_to_exit) if _left_to_exit is not None else 0


class Connection:
    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def close(self) -> None:
        if _left_to_exit is not None:
            _left_to_exit.append(self.sock)
        else:
            self.sock.close()

    def events(
        self,
        deadline: float | None,
        before_wait: Callable[[], None] | None = None,
        batches: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Answer lines as dicts until the server closes (unknown lines skipped); before each
        wait for more, ``before_wait`` (a flush). ``batches``: asked for, an ``output`` line's
        ``bytes`` of lines follow it, given as its ``data``."""
        buffer, start = self.buffer, 0
        while True:
            while (newline := buffer.find(b"\n", start)) >= 0:
                event = decode_event(buffer[start:newline])
                size = event.get("bytes") if batches and event is not None else None
                if type(size) is int and size >= 0 and event and event["event"] == EVENT_OUTPUT:
                    end = newline + 1 + size
                    if len(buffer) < end:
                        break  # the rest of its lines has yet to come
                    event["data"] = buffer[newline + 1 : end]
                    start = end
                else:
                    start = newline + 1
                if event is not None:
                    yield event
            self.buffer = buffer = buffer[start:]
            start = 0
            if before_wait is not None:
                before_wait()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(RECV_BYTES)
            if not chunk:
                return
            self.buffer = buffer = buffer + chunk


def connect(path: str, request: Request) -> Connection:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(path)
        trust_server(sock)  # before the request says anything: a daemon of ours or root's
        sock.sendall(encode_request(request))
    except OSError as exc:
        sock.close()
        raise Unreachable(
            f"runbroker: daemon unreachable at {path}: {exc.strerror or exc}"
        ) from None
    return Connection(sock)
