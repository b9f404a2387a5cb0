"""The container's tasks as the core holds them: ``registry`` says what a task is and which
requests it runs (the payload policy), ``changes`` says what a reload changed,
``notify_targets`` who hears of a task's runs. Reading them from the ``default`` command and
the TOML tasks file is ``daemon.taskfile``'s. The rest of the daemon imports these names from
here."""

from daemon.core.tasks.changes import TaskChanges, compare_tasks
from daemon.core.tasks.registry import (
    MAX_ARGS,
    Handler,
    RunContext,
    Task,
    TaskRefused,
    TaskRegistry,
    handler_context,
)

__all__ = [
    "MAX_ARGS",
    "Handler",
    "RunContext",
    "Task",
    "TaskChanges",
    "TaskRefused",
    "TaskRegistry",
    "compare_tasks",
    "handler_context",
]
