"""The container's tasks: ``registry`` says what a task is and which requests it runs (the
payload policy), ``loading`` reads them from the ``default`` command and the TOML tasks file.
The rest of the daemon imports these names from here."""

from daemon.core.tasks.loading import (
    TaskConfigError,
    build_registry,
    load_handler,
    parse_tasks_toml,
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

__all__ = [
    "MAX_ARGS",
    "Handler",
    "RunContext",
    "Task",
    "TaskConfigError",
    "TaskRefused",
    "TaskRegistry",
    "build_registry",
    "handler_context",
    "load_handler",
    "parse_tasks_toml",
]
