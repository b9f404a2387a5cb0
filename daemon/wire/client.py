"""The thin client behind ``runbroker trigger|status|cancel|health``.

Every ``docker exec`` starts it cold, so it uses the C module ``_socket`` and the standard
library only: even the ``socket`` module's enum set-up costs more than the round trip.
"""

from __future__ import annotations

import sys
import time

# The exit codes this client returns (the command line's contract), re-exported for its callers.
from daemon.exits import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from daemon.exits import EXIT_FAILED as EXIT_FAILED
from daemon.exits import EXIT_GAVE_UP as EXIT_GAVE_UP
from daemon.exits import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from daemon.exits import EXIT_OK as EXIT_OK
from daemon.exits import EXIT_SKIPPED as EXIT_SKIPPED
from daemon.exits import EXIT_TEMPFAIL as EXIT_TEMPFAIL
from daemon.exits import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
from daemon.exits import EXIT_USAGE as EXIT_USAGE
from daemon.wire.client_socket import CONNECT_TIMEOUT_S as CONNECT_TIMEOUT_S
from daemon.wire.client_socket import FORBIDDEN_TEXT as FORBIDDEN_TEXT
from daemon.wire.client_socket import Connection as Connection
from daemon.wire.client_socket import Unreachable as Unreachable
from daemon.wire.client_socket import connect as connect
from daemon.wire.client_socket import leave_sockets_to_exit as leave_sockets_to_exit
from daemon.wire.client_socket import left_sockets as left_sockets
from daemon.wire.client_socket import socket_path_from_env as socket_path_from_env
from daemon.wire.printer import Printer, dropped_text
from daemon.wire.protocol import (
    EVENT_DONE,
    EVENT_OUTPUT,
    EVENT_QUEUED,
    ControlRequest,
    SubmitRequest,
)
from daemon.wire.reasons import CODE_SKIPPED, refused_user, worth_a_retry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


def _outcome(event: dict[str, Any], accepted: bool) -> tuple[int, str]:
    """The exit code of a ``done`` event and how to say it.

    A ``done`` before ``queued`` is the daemon refusing the request: worth a retry (75) for a
    full queue or a shutdown, skipped by its task's ``on_busy`` (3), a usage error (2) for a
    request it would never run. The event's ``code`` tells which, or its reason's text from a
    daemon older than the code."""
    reason = str(event.get("reason", "")) or "unknown reason"
    if event.get("ok"):
        return EXIT_OK, ""
    if worth_a_retry(event):
        return EXIT_TEMPFAIL, f"rejected: {reason}"
    if not accepted and event.get("code") == CODE_SKIPPED:
        return EXIT_SKIPPED, reason  # the task's busy policy: not a usage error, not a retry
    if not accepted and refused_user(event):
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
        for event in conn.events(deadline, printer.flush, batches=True):
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
    return event.get("event") == EVENT_DONE and not event.get("ok") and refused_user(event)


def control(path: str, request: ControlRequest, timeout_s: float = 10.0) -> dict[str, Any]:
    """One control request and its single answer. Raises ``Unreachable``."""
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
