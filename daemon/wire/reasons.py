"""The reasons a client is told and the stable code beside each, made in this one place.

``reason`` is for people and may be reworded, ``code`` is for programs. No imports, because the
thin client loads this module on every cold ``docker exec``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the thin client must not pay for importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# -- the codes ---------------------------------------------------------------------------------
# A request refused before any run existed: its one ``done`` line.
CODE_BAD_REQUEST = "bad_request"  # undecodable, too large, too slow, a field it may not have
CODE_FORBIDDEN = "forbidden"  # the peer check: another uid than the daemon's or root
CODE_UNKNOWN_TASK = "unknown_task"  # no such task, or one a reload removed
CODE_NOT_ALLOWED = "not_allowed"  # args or env the task does not allow
CODE_QUEUE_FULL = "queue_full"
CODE_SHUTTING_DOWN = "shutting_down"
CODE_BUSY = "busy"  # too many unfinished requests, or too many connections
CODE_SKIPPED = "skipped"  # the task's run is queued or running and its ``on_busy`` is skip
# How a run ended when it did not succeed: its ``done`` line.
CODE_FAILED = "failed"  # exit status, signal, a handler's exception or refused output
CODE_TIMEOUT = "timeout"  # the task's own timeout
CODE_CANCELLED = "cancelled"  # ``runbroker cancel``
CODE_SHUTDOWN = "shutdown"  # cancelled by the daemon's shutdown
CODE_INTERRUPTED = "interrupted"  # ``runbroker once``: a signal
CODE_FENCED = "fenced"  # a database job's lease could not be renewed in time
CODE_LEASE_LOST = "lease_lost"  # a database job's lease is another replica's
CODE_JOB_REMOVED = "job_removed"  # a database job's row was deleted
CODE_REPLACED = "replaced"  # a newer run of its task replaced it (``on_busy = "replace"``)
CODE_MISSED = "missed"  # a scheduled run that could not start within its start deadline
# The other answers that carry a reason.
CODE_OVERDUE = "overdue"  # the ``overdue`` event: past the task's soft timeout
CODE_NO_SUCH_RUN = "no_such_run"  # ``cancel`` and ``logs`` found no run to act on
CODE_UNHEALTHY = "unhealthy"  # ``health``
CODE_RELOAD_REFUSED = "reload_refused"  # ``reload``: the tasks file was not taken

# Worth trying again later (exit 75): the daemon is busy, full or stopping.
TEMPFAIL_CODES = frozenset({CODE_QUEUE_FULL, CODE_SHUTTING_DOWN, CODE_BUSY})

# -- the fixed reasons -------------------------------------------------------------------------
REASON_UNDECODABLE = "undecodable request"
REASON_TOO_LARGE = "request too large"
REASON_TOO_SLOW = "request not received in time"
REASON_FORBIDDEN = "permission denied"
REASON_BUSY = "server busy: too many unfinished requests"
REASON_CONNECTIONS = "server busy: too many connections"
REASON_FULL = "run queue is full"
REASON_CLOSED = "scheduler is shutting down"
REASON_SHUTDOWN_CANCEL = "cancelled: scheduler shutting down"
REASON_USER_CANCEL = "cancelled by request"
REASON_INTERRUPTED = "cancelled: interrupted by a signal"
REASON_FENCED = "cancelled: lease could not be renewed; stopped before it could expire"
REASON_LEASE_LOST = "cancelled: lease lost to another replica"
REASON_JOB_REMOVED = "cancelled: the job was removed"
REASON_REPLACED = "cancelled: replaced by a newer run of its task"
REASON_MISSED = "cancelled: not started within its start deadline"
REASON_NOT_A_DICT = "handler returned a non-dict value"
REASON_NOT_JSON = "handler returned output that is not JSON"

# The texts of the retry-worthy reasons: how a client tells them from a daemon without ``code``.
TEMPFAIL_REASONS = frozenset({REASON_FULL, REASON_CLOSED, REASON_BUSY, REASON_CONNECTIONS})
# A cancelled run's code by its reason (the daemon alone cancels, always with one of these).
CANCEL_CODES = {
    REASON_USER_CANCEL: CODE_CANCELLED,
    REASON_SHUTDOWN_CANCEL: CODE_SHUTDOWN,
    REASON_INTERRUPTED: CODE_INTERRUPTED,
    REASON_FENCED: CODE_FENCED,
    REASON_LEASE_LOST: CODE_LEASE_LOST,
    REASON_JOB_REMOVED: CODE_JOB_REMOVED,
    REASON_REPLACED: CODE_REPLACED,
    REASON_MISSED: CODE_MISSED,
}


def cancel_code(reason: str) -> str:
    """The code of a run cancelled with ``reason``."""
    return CANCEL_CODES.get(reason, CODE_CANCELLED)


# -- the reasons made of their circumstances ---------------------------------------------------
def _seconds(seconds: float) -> str:
    return f"{seconds:g}s"


def timed_out_reason(timeout_s: float) -> str:
    return f"timed out after {_seconds(timeout_s)}"


def overdue_reason(soft_timeout_s: float) -> str:
    return f"running longer than {_seconds(soft_timeout_s)}"


def exit_reason(exit_code: int | None, signal_name: str | None) -> str:
    """A command's end that was not a success: the signal that killed it, or its status."""
    return f"killed by {signal_name}" if signal_name else f"exit status {exit_code}"


def crash_reason(exc: BaseException) -> str:
    """A handler's exception, as its run's reason: its type and message, at most 1000 chars."""
    return f"{type(exc).__name__}: {exc}"[:1000]


def unknown_task_reason(shown_name: str, listing: str) -> str:
    return f"unknown task {shown_name}: this container defines {listing}"


def removed_task_reason(name: str) -> str:
    return f"task {name!r} was removed by a reload"


def busy_skipped_reason(task: str) -> str:
    return f"skipped: task {task!r} already has a run queued or running (on_busy = skip)"


def args_refused_reason(task: str) -> str:
    return f"task {task!r} does not accept args"


def too_many_args_reason(max_args: int) -> str:
    return f"too many args (at most {max_args})"


def env_refused_reason(task: str, name: str) -> str:
    return f"task {task!r} does not allow env {name!r}"


# -- what a client decides from an answer ------------------------------------------------------
def worth_a_retry(answer: Mapping[str, Any]) -> bool:
    """A refusal the client may try again later (exit 75): by its ``code``, or, from a daemon
    older than the field, by its reason's text."""
    code = answer.get("code")
    if isinstance(code, str):
        return code in TEMPFAIL_CODES
    return answer.get("reason") in TEMPFAIL_REASONS


def refused_user(answer: Mapping[str, Any]) -> bool:
    """The daemon's peer check refused this user (exit 69): by ``code``, else by the text."""
    code = answer.get("code")
    if isinstance(code, str):
        return code == CODE_FORBIDDEN
    return answer.get("reason") == REASON_FORBIDDEN
