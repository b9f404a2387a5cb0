"""One notification to send, and the versioned JSON document a webhook receives.

A ``Notice`` is made on the executor's side of the queue (``on_finish``), so making one costs
a bounded amount whatever the run printed: at most ``TAIL_LINES`` of its last lines, each cut
at ``TAIL_LINE_CHARS``, ``TAIL_BYTES`` in all. The document is built later, by the sender.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daemon.core.rfc3339 import rfc3339_utc, rfc3339_utc_at
from daemon.core.tasks.notify_targets import heard_event

if TYPE_CHECKING:
    from daemon.core.journal import RunLog
    from daemon.core.runqueue import Run
    from daemon.core.tasks.notify_targets import TaskNotify

SCHEMA = "runbroker.notification/1"
TAIL_LINES = 20
TAIL_LINE_CHARS = 1000
TAIL_BYTES = 8192


@dataclass(slots=True)
class Notice:
    """What happened (``events``: the first a target listens to is the one it hears, so a
    recovery is a plain success to a target that does not ask for recoveries). Treated as
    immutable by convention, as the run's records are: a frozen dataclass costs microseconds
    more on the executor's side of the queue."""

    events: tuple[str, ...]
    task: str
    notify: TaskNotify
    run_id: str | None = None
    trigger: str | None = None
    job: str | None = None
    attempt: int | None = None
    outcome: str | None = None
    reason: str = ""
    code: str = ""
    exit_code: int | None = None
    duration_ms: int | None = None
    scheduled_for: str | None = None
    started_at: float | None = None
    tail: tuple[str, ...] = ()
    tail_dropped: int = 0
    silent_for_s: float | None = None
    changed: bool = False  # the task's state changed: its first failure, or its recovery

    def event_for(self, on: frozenset[str]) -> str | None:
        """The event a target listening to ``on`` hears of this notice (None: none)."""
        return heard_event(on, self.events, self.changed)


def run_notice(
    run: Run,
    events: tuple[str, ...],
    notify: TaskNotify,
    log: RunLog | None,
    changed: bool = False,
) -> Notice:
    """The notice of ``run`` (started, or with its result), with its output's last lines."""
    request, result = run.request, run.result
    tail, dropped = output_tail(log) if log is not None else ((), 0)
    return Notice(
        events=events,
        task=request.task,
        notify=notify,
        run_id=run.id,
        trigger=request.trigger,
        job=request.job,
        attempt=request.attempt,
        outcome=None if result is None else result.outcome,
        reason="" if result is None else result.reason[:TAIL_LINE_CHARS],
        code="" if result is None else result.wire_code,
        exit_code=None if result is None else result.exit_code,
        duration_ms=None if result is None else result.duration_ms,
        scheduled_for=None if request.scheduled_for is None else rfc3339_utc(request.scheduled_for),
        started_at=run.started_at,
        tail=tail,
        tail_dropped=dropped,
        changed=changed,
    )


def output_tail(log: RunLog) -> tuple[tuple[str, ...], int]:
    """The last lines of ``log`` within the bounds, and how many earlier lines are not in it."""
    end = log.end_seq
    first = max(log.first_seq, end - TAIL_LINES)
    lines: list[str] = []
    size = 0
    for seq in range(end - 1, first - 1, -1):
        line = log.line_at(seq)[1][:TAIL_LINE_CHARS]
        size += len(line.encode("utf-8", "replace")) + 1
        if size > TAIL_BYTES:
            first = seq + 1
            break
        lines.append(line)
    lines.reverse()
    return tuple(lines), first


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else rfc3339_utc_at(timestamp)


def document(notice: Notice, event: str) -> dict[str, Any]:
    """The JSON a webhook receives (``SCHEMA``; the README shows it): fields are only added
    within a version, never renamed or removed."""
    finished_at = None
    if notice.started_at is not None and notice.duration_ms is not None:
        finished_at = notice.started_at + notice.duration_ms / 1000
    return {
        "schema": SCHEMA,
        "event": event,
        "task": notice.task,
        "host": os.uname().nodename,
        "run_id": notice.run_id,
        "trigger": notice.trigger,
        "job": notice.job,
        "attempt": notice.attempt,
        "outcome": notice.outcome,
        "reason": notice.reason,
        "code": notice.code,
        "exit_code": notice.exit_code,
        "duration_ms": notice.duration_ms,
        "scheduled_for": notice.scheduled_for,
        "started_at": _iso(notice.started_at),
        "finished_at": _iso(finished_at),
        "output_tail": list(notice.tail),
        "output_lines_before_tail": notice.tail_dropped,
        "silent_for_s": notice.silent_for_s,
        "max_silence_s": notice.notify.max_silence_s if event == "silence" else None,
        "sent_at": _iso(time.time()),
    }


def tail_text(notice: Notice) -> str:
    """The output tail as one text (a ping's body, a command's variable)."""
    text = "\n".join(notice.tail)
    if notice.reason:
        text = f"{text}\n{notice.reason}" if text else notice.reason
    return text
