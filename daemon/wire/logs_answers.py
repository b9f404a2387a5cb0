"""The wire vocabulary of ``runbroker logs``: the form of a run id, and the answer lines.

Every answer ends with a terminal line (``done``, ``end``, a refusal, ``runs``), so a client
that meets the end of the connection first knows it was cut off and never takes what it got
for the run's whole output. Standard library only: the thin client's ``logs`` loads it.
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
    """The first line when following a task that has no run yet (``task`` empty: any run).

    The run's own ``logs`` line follows once one is queued."""
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
