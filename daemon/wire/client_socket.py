"""The thin client's connection to the daemon: the socket, peer-checked before the request is
sent, and the answer lines read from it.

Standard library only, as the client (``client``).
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
FIRST_READ_BYTES = 16 * 1024  # a trigger's answer is a few short lines: a cold start fills no more
RECV_BYTES = 256 * 1024  # the most one read takes, reached by reads that filled their room


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
    """Leave a finished connection's socket open for the process's exit (``os._exit``).

    As PID 1 the daemon's exit after its last client kills the container's processes, and a
    client killed in its interpreter's teardown would make ``docker exec`` report -9. The kernel
    closes the socket after the exit status is fixed. Only the command's entry point calls this."""
    global _left_to_exit
    if _left_to_exit is None:
        _left_to_exit = []


def left_sockets() -> int:
    """How many sockets wait for the process's exit to close them."""
    return len(_left_to_exit) if _left_to_exit is not None else 0


class Connection:
    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock

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
        """Answer lines as dicts until the server closes, unknown lines skipped.

        With ``batches`` an ``output`` line's lines follow it as ``data``, a view valid until the
        next line is asked for. One buffer is kept for every read, because a follower of a chatty
        run takes megabytes a second and a fresh object per read costs page faults and a copy.
        It starts small and grows with the reads: zero-filling a large one costs a cold
        ``trigger`` a millisecond of page faults."""
        read_bytes = min(FIRST_READ_BYTES, RECV_BYTES)  # doubled after a read that filled it
        buffer = bytearray(2 * read_bytes)
        start = end = scanned = 0  # received, not taken: [start, end), no newline before scanned
        frame: tuple[dict[str, Any], int] | None = None  # an output line awaiting its lines' end
        timeout: float | None = -1.0  # the socket's, as last set
        while True:
            while True:
                if frame is not None:
                    event, stop = frame
                    if end < stop:
                        break  # the rest of its lines has yet to come
                    event["data"] = data = memoryview(buffer)[start:stop]
                    start = scanned = stop
                    frame = None
                    yield event
                    data.release()  # its bytes are the buffer's, for the next read to reuse
                    continue
                newline = buffer.find(b"\n", scanned, end)
                if newline < 0:
                    scanned = end
                    break
                answer = decode_event(bytes(buffer[start:newline]))
                start = scanned = newline + 1
                if answer is None:
                    continue
                size = answer.get("bytes") if batches else None
                if type(size) is int and size >= 0 and answer["event"] == EVENT_OUTPUT:
                    frame = (answer, start + size)
                    continue
                yield answer
            if start == end or len(buffer) - end < read_bytes:  # all taken, or no room
                buffer, frame = _moved_to_front(buffer, start, end, frame, read_bytes)
                end, scanned, start = end - start, scanned - start, 0
            if before_wait is not None:
                before_wait()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            if remaining != timeout:
                self.sock.settimeout(remaining)
                timeout = remaining
            count = self.sock.recv_into(memoryview(buffer)[end:], read_bytes)
            if not count:
                return
            end += count
            if count == read_bytes < RECV_BYTES:  # the daemon sends faster: take more at a time
                read_bytes = min(2 * read_bytes, RECV_BYTES)


def _moved_to_front(
    buffer: bytearray,
    start: int,
    end: int,
    frame: tuple[dict[str, Any], int] | None,
    read_bytes: int,
) -> tuple[bytearray, tuple[dict[str, Any], int] | None]:
    """What is left of ``buffer`` (``[start, end)``) moved to its front, the buffer grown when
    that leaves less than ``read_bytes`` of room.

    A waiting ``frame``'s end is moved with it."""
    kept = end - start
    if kept + read_bytes > len(buffer):
        grown = bytearray(2 * (kept + read_bytes))
        grown[:kept] = memoryview(buffer)[start:end]
        buffer = grown
    elif kept:
        view = memoryview(buffer)
        view[:kept] = view[start:end]
    if frame is not None:
        frame = (frame[0], frame[1] - start)
    return buffer, frame


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
