"""The thin client of ``runbroker logs``: one request, the run's lines printed as ``trigger``
prints them, and the exit code.

Like ``client``, standard library only and no asyncio, because a cold ``docker exec`` starts it.
"""

from __future__ import annotations

import sys

from daemon.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from daemon.wire import client
from daemon.wire.logs_answers import (
    EVENT_END,
    EVENT_LOGS,
    EVENT_RUNS,
    STATE_QUEUED,
    STATE_WAITING,
)
from daemon.wire.printer import Printer, dropped_text
from daemon.wire.protocol import EVENT_DONE, EVENT_OUTPUT, LogsRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


def _say(text: str, err: TextIO) -> None:
    print(f"runbroker: {text}", file=err, flush=True)


def _header(event: dict[str, Any], follow: bool, err: TextIO) -> None:
    if event.get("state") == STATE_WAITING:
        task = event.get("task")
        what = f"task {task!r} has no run yet" if task else "no run yet"
        _say(f"{what}; waiting for one to be queued (Ctrl-C to stop)", err)
        return
    run_id = event.get("id", "?")
    dropped = event.get("dropped_lines") or 0
    if dropped:
        _say(f"{dropped} earlier lines of {run_id} dropped (a run's last lines are kept)", err)
    if follow and event.get("state") == STATE_QUEUED:
        _say(f"{run_id} is queued; waiting for it to start", err)


def _missed(event: dict[str, Any], err: TextIO) -> None:
    missed = dropped_text(event)
    if missed:
        _say(missed, err)


def _done(event: dict[str, Any], follow: bool, err: TextIO) -> int:
    _missed(event, err)
    code, text = client._outcome(event, True)
    if event.get("ok"):
        duration = event.get("duration_ms")
        _say(f"{event.get('id', '')} done" + (f" in {duration} ms" if duration else ""), err)
    else:
        _say(text, err)
    return code if follow else EXIT_OK


def logs(
    path: str,
    request: LogsRequest,
    *,
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the run's buffered lines (with ``request.follow``, the live ones until it ends) and
    return the exit code.

    0, or with ``follow`` the run's own, as ``trigger``'s. 2 when there is no such run, 69 when
    the daemon is unreachable."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    batched = LogsRequest(request.id, request.task, request.follow, request.runs, batch=True)
    try:
        conn = client.connect(path, batched)
    except client.Unreachable as exc:
        print(exc, file=err)
        return EXIT_UNAVAILABLE
    found = False
    printer = Printer(out, err)
    try:
        for event in conn.events(None, printer.flush, batches=True):
            kind = event.get("event")
            if as_json:
                printer.json(event)
            if kind == EVENT_RUNS:
                if not as_json:
                    print(runs_table(event.get("runs") or []), file=printer.to(out))
                return EXIT_OK
            if kind == EVENT_LOGS and not event.get("ok"):
                _say(str(event.get("reason", "no such run")), printer.to(err))
                return EXIT_USAGE
            if kind == EVENT_DONE and not found:  # answered before the request was served
                code, text = client._outcome(event, False)
                _say(client.FORBIDDEN_TEXT if code == EXIT_UNAVAILABLE else text, printer.to(err))
                return code
            if kind == EVENT_LOGS:
                found = True
                if not as_json:
                    _header(event, request.follow, printer.to(err))
            elif kind == EVENT_OUTPUT and not as_json:
                printer.output(event)
            elif kind == EVENT_END:  # not following: all there was has been sent
                _missed(event, printer.to(err))
                return EXIT_OK
            elif kind == EVENT_DONE:
                if as_json:
                    _missed(event, printer.to(err))
                    return client._outcome(event, True)[0] if request.follow else EXIT_OK
                return _done(event, request.follow, printer.to(err))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # our own output was closed: the caller exits quietly
    except OSError as exc:
        _say(f"connection lost: {exc.strerror or exc}", printer.to(err))
        return EXIT_UNAVAILABLE
    finally:
        conn.close()
        printer.flush()
    # Every answer ends with a terminal line: without it, this client was cut off.
    _say(
        "connection closed before the run's result"
        if request.follow or not found
        else "connection closed before the end of the run's lines",
        err,
    )
    return EXIT_UNAVAILABLE


def runs_table(runs: list[dict[str, Any]]) -> str:
    """The finished runs of a ``runs`` answer, one a line, newest first."""
    import time

    rows = [["ID", "TASK", "TRIGGER", "OUTCOME", "STARTED", "DURATION", "LINES"]]
    for run in runs:
        started = run.get("started_at")
        when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(started)) if started else "-"
        outcome = str(run.get("outcome", "?"))
        if run.get("exit_code") not in (None, 0):
            outcome += f" ({run['exit_code']})"
        lines, kept = run.get("lines", 0), run.get("kept_lines", 0)
        rows.append(
            [
                str(run.get("id", "?")),
                str(run.get("task", "?")),
                str(run.get("trigger", "?")),
                outcome,
                when,
                f"{(run.get('duration_ms') or 0) / 1000:.3f}s",
                str(lines) if lines == kept else f"{lines} ({kept} kept)",
            ]
        )
    if len(rows) == 1:
        return "no finished run kept"
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
