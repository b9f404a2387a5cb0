"""What a task is and what it accepts, and the ``TaskRegistry`` of the container's tasks.

A request for an unknown task, or with args or env its task does not allow, is refused before
anything runs. The database never names a command: jobs name tasks, and only the container
defines tasks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.core.runqueue import Rejected, RunRequest
from daemon.core.tasks.changes import TaskChanges, compare_tasks
from daemon.core.tasks.notify_targets import TaskNotify
from daemon.core.ticker.busy import OnBusy
from daemon.schedules import Schedule
from daemon.wire.protocol import MAX_ARGS as MAX_ARGS  # the wire's bound, held by the registry too
from daemon.wire.reasons import (
    CODE_NOT_ALLOWED,
    CODE_UNKNOWN_TASK,
    args_refused_reason,
    env_refused_reason,
    removed_task_reason,
    too_many_args_reason,
    unknown_task_reason,
)

LISTED_TASKS = 30  # an unknown task's refusal names at most this many of the defined ones


@dataclass(frozen=True)
class RunContext:
    """What a Python handler receives: the run's identity and its inputs."""

    run_id: str
    task: str
    trigger: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    payload: Any
    context: Mapping[str, str]


def handler_context(
    run_id: str,
    task: str,
    trigger: str,
    args: tuple[str, ...],
    env: Mapping[str, str],
    payload: Any,
    context: Mapping[str, str],
) -> RunContext:
    """``RunContext(...)`` for the executor's per-run path: the same frozen object, filled in
    without the frozen dataclass's object.__setattr__ per field (1.8 -> 0.7 us a run)."""
    ctx: RunContext = object.__new__(RunContext)
    fields = ctx.__dict__
    fields["run_id"] = run_id
    fields["task"] = task
    fields["trigger"] = trigger
    fields["args"] = args
    fields["env"] = env
    fields["payload"] = payload
    fields["context"] = context
    return ctx


Handler = Callable[[RunContext], Awaitable[dict[str, Any] | None]]


class TaskRefused(Rejected):
    """A request its task does not run, or one for no such task. ``reason`` says why."""

    def __init__(self, reason: str, code: str = CODE_NOT_ALLOWED) -> None:
        super().__init__(reason, code)


@dataclass(frozen=True)
class Task:
    name: str
    command: tuple[str, ...] = ()
    handler: Handler | None = None
    handler_ref: str = ""
    allow_args: bool = False
    allow_env: frozenset[str] = frozenset()
    timeout_s: float | None = None
    soft_timeout_s: float | None = None
    grace_s: float | None = None
    interval_s: float | None = None
    schedule: Schedule | None = None
    misfire: str = "coalesce"  # a slot planned while the daemon was down (``core.ticker.catchup``)
    catchup_window_s: float | None = None  # older missed slots are recorded, never run
    on_busy: OnBusy | None = None  # None: a trigger queues, a tick is skipped
    start_deadline_s: float | None = None  # a tick not started this long after its slot: missed
    notify: TaskNotify | None = None  # who hears of its runs (``notify_targets``)

    def refusal(self, request: RunRequest) -> str | None:
        """Why this task refuses ``request``, or None when it may run."""
        if request.args and not self.allow_args:
            return args_refused_reason(self.name)
        if len(request.args) > MAX_ARGS:
            return too_many_args_reason(MAX_ARGS)
        for name in request.env:
            if name not in self.allow_env:
                return env_refused_reason(self.name, name)
        return None


@dataclass
class TaskRegistry:
    tasks: dict[str, Task] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)  # name -> why, since the last reload
    source_digest: str | None = None  # sha256 of the tasks file's bytes read at start-up

    def get(self, name: str) -> Task | None:
        return self.tasks.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tasks

    def __iter__(self) -> Iterator[str]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def replace(self, tasks: Mapping[str, Task], changes: TaskChanges | None = None) -> TaskChanges:
        """Swap in ``tasks`` whole (a reload) and say what changed. A removed name is
        remembered (a queued run of it is refused with that reason) until a reload adds it.
        ``changes``: ``compare_tasks`` of the tasks held now and ``tasks``, made before (off
        the event loop: thousands of tasks take tens of milliseconds)."""
        if changes is None:
            changes = compare_tasks(self.tasks, tasks)
        for name in changes.removed:
            self.removed[name] = removed_task_reason(name)
        self.tasks = dict(tasks)
        for name in self.tasks:
            self.removed.pop(name, None)
        return changes

    def graces_s(self) -> dict[str, float | None]:
        """Each task's own grace (None: RUNBROKER_GRACE applies)."""
        return {name: task.grace_s for name, task in self.tasks.items()}

    def admit(self, request: RunRequest) -> Task:
        """The task that runs ``request``, or ``TaskRefused`` when there is none or it refuses."""
        task = self.tasks.get(request.task)
        if task is None:
            removed = self.removed.get(request.task)
            if removed is not None:
                reason = f"{removed} (this container defines {self.listing()})"
                raise TaskRefused(reason, CODE_UNKNOWN_TASK)
            reason = unknown_task_reason(_shown(request.task), self.listing())
            raise TaskRefused(reason, CODE_UNKNOWN_TASK)
        if not request.args and not request.env:
            return task  # nothing for the task's policy to refuse
        refusal = task.refusal(request)
        if refusal is not None:
            raise TaskRefused(refusal)
        return task

    def refusal(self, request: RunRequest) -> str | None:
        """Why ``request`` would be refused (``admit``'s reason), or None when it may run."""
        try:
            self.admit(request)
        except TaskRefused as refused:
            return refused.reason
        return None

    def listing(self) -> str:
        """The task names for people, sorted, at most ``LISTED_TASKS`` of them."""
        names = sorted(self.tasks)
        if not names:
            return "no tasks"
        shown = ", ".join(names[:LISTED_TASKS])
        more = len(names) - LISTED_TASKS
        return f"{shown} and {more} more" if more > 0 else shown

    def names(self) -> frozenset[str]:
        return frozenset(self.tasks)


def _shown(name: str) -> str:
    """A requested task name as a refusal repeats it: no task name is longer than 128
    characters, so a longer one is cut there (a 16 MiB name is not echoed back whole)."""
    if len(name) <= 128:
        return repr(name)
    return f"{name[:128]!r}... ({len(name)} characters)"
