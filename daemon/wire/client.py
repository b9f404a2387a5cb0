"""The thin client behind ``runbroker trigger|status|cancel|health``.

Started cold by every ``docker exec``, so it uses blocking sockets and the standard library only:
no asyncio, pydantic or structlog, and not even ``typing`` or the ``socket`` module (whose enum
set-up costs more than the round trip to the daemon): the C module ``_socket`` does the work.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

# The exit codes this client returns (the command line's contract); re-exported for its callers.
from daemon.exits import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from daemon.exits import EXIT_FAILED as EXIT_FAILED
from daemon.exits import EXIT_GAVE_UP as EXIT_GAVE_UP
from daemon.exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from daemon.exits import EXIT_OK as EXIT_OK
from daemon.exits import EXIT_TEMPFAIL as EXIT_TEMPFAIL
from daemon.exits import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
from daemon.exits import EXIT_USAGE as EXIT_USAGE
from daemon.wire.peer import trust_server
from daemon.wire.printer import Printer, dropped_text
from daemon.wire.protocol import (
    EVENT_DONE,
    EVENT_OUTPUT,
    EVENT_QUEUED,
    REASON_FORBIDDEN,
    TEMPFAIL_REASONS,
    ControlRequest,
    Request,
    SubmitRequest,
    decode_event,
    encode_request,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TextIO

DEFAULT_SOCKET = "/run/runbroker/runbroker.sock"
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
        self, deadline: float | None, before_wait: Callable[[], None] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Answer lines as dicts until the server closes; unknown lines are skipped.
        ``before_wait`` is called before each wait for more (to flush what was printed: a
        read's lines are written together, and shown before the client waits)."""
        while True:
            if b"\n" in self.buffer:
                *lines, self.buffer = self.buffer.split(b"\n")
                for line in lines:
                    event = decode_event(line)
                    if event is not None:
                        yield event
            if before_wait is not None:
                before_wait()
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.sock.settimeout(remaining)
            else:
                self.sock.settimeout(None)
            chunk = self.sock.recv(RECV_BYTES)
            if not chunk:
                return
            self.buffer += chunk


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


def _outcome(event: dict[str, Any], accepted: bool) -> tuple[int, str]:
    """The exit code of a ``done`` event and how to say it. A ``done`` before ``queued`` is the
    daemon refusing the request itself: a full queue or a shutdown is worth retrying (75), a
    request it would never run (an unknown task, args or env the task does not allow, a
    malformed request) is a usage error (2)."""
    reason = str(event.get("reason", "")) or "unknown reason"
    if event.get("ok"):
        return EXIT_OK, ""
    if reason in TEMPFAIL_REASONS:
        return EXIT_TEMPFAIL, f"rejected: {reason}"
    if not accepted and reason == REASON_FORBIDDEN:
        # The peer check: as unusable for this user as a socket it cannot open (69).
        return EXIT_UNAVAILABLE, FORBIDDEN_TEXT
    if not accepted:
        return EXIT_USAGE, f"refused: {reason}"
    return EXIT_FAILED, f"failed: {reason}"


def trigger(
    path: str,
    request: SubmitRequest,
    *,
    detach: bool = False,
    as_json: bool = False,
    timeout_s: float | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Submit one run, stream its events, and return the exit code of the contract.
    ``out``/``err`` default to ``sys.stdout``/``sys.stderr`` as they are at the call."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    deadline = time.monotonic() + timeout_s if timeout_s else None
    batched = SubmitRequest(request.task, request.args, request.env, batch=True)
    try:
        conn = connect(path, batched)
    except Unreachable as exc:
        print(exc, file=err)
        return EXIT_UNAVAILABLE
    run_id = ""
    accepted = False  # a run exists once the daemon has said anything but a refusal
    printer = Printer(out, err)
    try:
        for event in conn.events(deadline, printer.flush):
            kind = event.get("event")
            run_id = str(event.get("id", run_id))
            if kind == EVENT_OUTPUT and not as_json:
                printer.output(event)
                continue
            if as_json:
                printer.json(event)
                if kind == EVENT_DONE and dropped_text(event):
                    print(f"runbroker: {dropped_text(event)}", file=printer.to(err))
            else:
                printer.lifecycle(event, _outcome(event, accepted)[1])
            if kind == EVENT_QUEUED and detach:
                if not as_json:
                    print(run_id, file=printer.to(out))
                return EXIT_OK
            if kind == EVENT_DONE:
                return _outcome(event, accepted)[0]
            accepted = True
    except TimeoutError:
        print(f"runbroker: gave up waiting; run {run_id or '?'} goes on", file=printer.to(err))
        return EXIT_GAVE_UP
    except KeyboardInterrupt:
        print(f"runbroker: interrupted; run {run_id or '?'} goes on", file=printer.to(err))
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # our own output was closed, not the daemon's socket: the caller exits quietly
    except OSError as exc:
        print(f"runbroker: connection lost: {exc.strerror or exc}", file=printer.to(err))
        return EXIT_UNAVAILABLE
    finally:
        conn.close()
        printer.flush()
    print("runbroker: connection closed before the run's result", file=err)
    return EXIT_UNAVAILABLE


def _refused_by_peer_check(event: dict[str, Any]) -> bool:
    """A control request answered by the daemon's peer check instead of by its op."""
    return (
        event.get("event") == EVENT_DONE
        and not event.get("ok")
        and event.get("reason") == REASON_FORBIDDEN
    )


def control(path: str, request: ControlRequest, timeout_s: float = 10.0) -> dict[str, Any]:
    """One control request; its single answer. Raises ``Unreachable``."""
    conn = connect(path, request)
    try:
        for event in conn.events(time.monotonic() + timeout_s):
            if _refused_by_peer_check(event):
                raise Unreachable(f"runbroker: {FORBIDDEN_TEXT}")
            return event
    except (TimeoutError, OSError) as exc:
        raise Unreachable(f"runbroker: no answer from {path}: {exc}") from None
    finally:
        conn.close()
    raise Unreachable(f"runbroker: no answer from {path}")
