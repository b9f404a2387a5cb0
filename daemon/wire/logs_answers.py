"""The wire vocabulary of ``runbroker logs``: the form of a run id, and the answer lines.

A ``logs`` request is ``{"op": "logs"}`` with a run ``id`` or a ``task`` (or neither: the
running run, else the latest finished one) and ``"follow": true`` to stay until the run ends.
The answer is a ``logs`` line (``ok``, and the run: ``id``, ``task``, ``trigger``, ``state``
``queued``/``running``/``done``, ``started_at``, ``dropped_lines``: its earlier lines the
buffer no longer holds), then the run's ``output`` lines from the buffer (each with ``at``,
when it was read, in seconds since the epoch) and, when following, the live ones; then the
run's ``done`` line when it has ended (``dropped_lines`` there: lines this client missed by
reading too slowly). Following a task that has no run yet (or, without a task, while there
is no run at all), the first line is a ``logs`` line with ``state`` ``waiting`` and no ``id``;
the run's own ``logs`` line follows when one is queued. Without ``follow``, a run not ended ends
its answer with an ``end`` line
instead (``id``, and ``dropped_lines``: the lines there were at the request that the buffer
dropped before this client read them). Every answer ends with one of these terminal lines
(``done``, ``end``, a refusal, ``runs``): a client that meets the end of the connection first
was cut off (a reader that stopped reading for a minute is) and must not take it as the run's
whole output. A refusal is a single ``logs`` line with ``ok`` false and a ``reason``.

With ``"runs": N`` (1 to ``MAX_LISTED_RUNS``) the answer is instead one ``runs`` line: ``runs``,
the last N finished runs the journal keeps, newest first, each ``id``, ``task``, ``trigger``,
``outcome`` (``succeeded``, ``failed``, ``timed_out``, ``cancelled``), ``reason``,
``exit_code``, ``started_at``, ``duration_ms``, ``lines`` (written) and ``kept_lines``.

Standard library only: the thin client's ``logs`` loads it.
"""

from __future__ import annotations

import re

from daemon.wire.reasons import CODE_NO_SUCH_RUN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT_LOGS = "logs"
EVENT_RUNS = "runs"
EVENT_END = "end"  # without follow: the lines there were have been sent
MAX_LISTED_RUNS = 10_000
STATE_QUEUED = "queued"
STATE_RUNNING = "running"
STATE_DONE = "done"
STATE_WAITING = "waiting"  # following a task (or any) with no run yet: until one is queued

# What ``daemon.core.runqueue.new_run_id`` makes: ``r``, the daemon's pid and start time in
# hex (at least seven digits), ``-`` and a counter. An argument of this form names a run; any
# other names a task. Seven digits keep short task names such as ``red-1`` names.
_RUN_ID = re.compile(r"r[0-9a-f]{7,}-[0-9]+")
_SHORT_RUN_ID = re.compile(r"r[0-9a-f]{1,6}-[0-9]+")
RUN_ID_FORM = "r, at least seven hex digits, -, a number"


def looks_like_run_id(text: str) -> bool:
    return _RUN_ID.fullmatch(text) is not None


def looks_like_a_short_run_id(text: str) -> bool:
    """A name a user may have meant as a run id, with too few hex digits to be one."""
    return _SHORT_RUN_ID.fullmatch(text) is not None


def logs_header(
    run_id: str,
    task: str,
    trigger: str,
    state: str,
    started_at: float | None,
    dropped_lines: int,
) -> dict[str, Any]:
    return {
        "event": EVENT_LOGS,
        "ok": True,
        "id": run_id,
        "task": task,
        "trigger": trigger,
        "state": state,
        "started_at": started_at,
        "dropped_lines": dropped_lines,
    }


def logs_waiting(task: str) -> dict[str, Any]:
    """The first line when following a task that has no run yet (``task`` empty: any run);
    the run's own ``logs`` line follows once one is queued."""
    return {"event": EVENT_LOGS, "ok": True, "id": "", "task": task, "state": STATE_WAITING}


def logs_refusal(reason: str) -> dict[str, Any]:
    return {"event": EVENT_LOGS, "ok": False, "reason": reason, "code": CODE_NO_SUCH_RUN}


def logged_lines(run_id: str, stream: str, lines: list[str], at: float) -> dict[str, Any]:
    """Journal lines read together, and when: one batch of them for a client that asked for
    batches (``batch``: ``at``, ``count``, ``bytes``, then the lines), else an ``output`` line
    for each (``line``, ``at``)."""
    return {"ok": True, "id": run_id, "stream": stream, "lines": lines, "at": round(at, 6)}


def logs_end(run_id: str, dropped_lines: int) -> dict[str, Any]:
    return {"event": EVENT_END, "ok": True, "id": run_id, "dropped_lines": dropped_lines}


def runs_answer(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"event": EVENT_RUNS, "ok": True, "runs": runs}
