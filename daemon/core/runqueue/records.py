"""The records of a run: what a submitter asks for, what the run came to, what listeners hear.

Slotted and immutable by convention rather than frozen, because a frozen dataclass sets each
field through ``object.__setattr__`` and a run makes several records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from daemon.core.context_vars import ATTEMPT, JOB, SCHEDULED_FOR
from daemon.core.rfc3339 import rfc3339_utc
from daemon.wire.protocol import done_event
from daemon.wire.reasons import CODE_FAILED, CODE_TIMEOUT, REASON_USER_CANCEL, cancel_code

Trigger = Literal["tick", "external", "schedule", "once"]
RunState = Literal["queued", "running", "done"]


@dataclass(slots=True)
class RunRequest:
    """What a submitter asks for.

    A database job's run also says which job it is (``job``, ``attempt``, ``scheduled_for``),
    set by the Postgres runner and None for every other run. The job sees them as
    ``RUNBROKER_JOB`` and the rest (``job_context``)."""

    task: str = "default"
    trigger: Trigger = "external"
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    payload: Any = None
    job: str | None = None
    attempt: int | None = None
    scheduled_for: datetime | None = None


def job_context(request: RunRequest) -> dict[str, str]:
    """A job run's fields that are set, as text, by their context names.

    A handler sees them as ``RunContext.context``, a command with ``RUNBROKER_`` before each
    name."""
    context: dict[str, str] = {}
    if request.job is not None:
        context[JOB] = request.job
    if request.scheduled_for is not None:
        context[SCHEDULED_FOR] = rfc3339_utc(request.scheduled_for)
    if request.attempt is not None:
        context[ATTEMPT] = str(request.attempt)
    return context


@dataclass(slots=True)
class RunResult:
    ok: bool
    reason: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    output: dict[str, Any] | None = None
    cancelled: bool = False
    timed_out: bool = False
    """The task's own ``timeout`` ended the run (set by the executor, read by the metrics)."""
    code: str = ""
    """The reason's code when neither the flags nor a cancel's reason tell it (``wire_code``)."""

    @property
    def wire_code(self) -> str:
        """The code the wire sends beside ``reason`` (``reasons.CODE_*``, empty for none)."""
        if self.code or self.ok or not self.reason:
            return self.code
        if self.cancelled:
            return cancel_code(self.reason)
        return CODE_TIMEOUT if self.timed_out else CODE_FAILED

    def done_fields(self, run_id: str) -> dict[str, Any]:
        """The ``done`` event of this result, as every listener and ``logs`` reader sees it."""
        return done_event(
            run_id,
            self.ok,
            self.reason,
            self.duration_ms,
            self.exit_code,
            self.output,
            self.wire_code,
        )

    @property
    def outcome(self) -> str:
        """``succeeded``, ``failed``, ``timed_out`` or ``cancelled`` (the metrics' label)."""
        if self.ok:
            return "succeeded"
        if self.cancelled:
            return "cancelled"
        return "timed_out" if self.timed_out else "failed"

    @property
    def cancelled_by_request(self) -> bool:
        """Cancelled by ``runbroker cancel`` (not by a shutdown or the runner itself): a
        database job records such a run and does not retry it."""
        return self.cancelled and self.reason == REASON_USER_CANCEL


@dataclass(slots=True)
class Event:
    """One lifecycle event of a run, as the wire protocol sends it."""

    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)


def is_json_output(output: object) -> bool:
    """The one rule for a run's output: JSON values only, and no NaN or infinity in them.

    NaN and the infinities are not JSON, and PostgreSQL's jsonb refuses them: a handler's run
    that returns them fails, a database job's as any other. A NUL or a lone surrogate in a text
    is JSON, which jsonb refuses too: ``store.jsonb_safe`` replaces those characters."""
    try:
        json.dumps(output, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True
