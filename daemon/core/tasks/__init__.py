"""The container's tasks: ``registry`` says what a task is and which requests it runs (the
payload policy), ``loading`` reads them from the ``default`` command and the TOML tasks file,
``changes`` says what a reload changed. The rest of the daemon imports these names from here."""

from daemon.core.tasks.changes import TaskChanges, compare_tasks
from daemon.core.tasks.loading import (
    build_registry,
    load_handler,
    parse_tasks_toml,
    tasks_from_bytes,
)
from daemon.core.tasks.registry import (
    MAX_ARGS,
    Handler,
    RunContext,
    Task,
    TaskRefused,
    TaskRegistry,
    handler_context,
)
from daemon.core.tasks.tasks_file import TASKS_FILE_MAX_BYTES, TaskConfigError, read_tasks_file

__all__ = [
    "MAX_ARGS",
    "TASKS_FILE_MAX_BYTES",
    "Handler",
    "RunContext",
    "Task",
    "TaskChanges",
    "TaskConfigError",
    "TaskRefused",
    "TaskRegistry",
    "build_registry",
    "compare_tasks",
    "handler_context",
    "load_handler",
    "parse_tasks_toml",
    "read_tasks_file",
    "tasks_from_bytes",
]
