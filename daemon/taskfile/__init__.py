"""The tasks file: the TOML file (and the ``default`` command) read into the core's plain
``Task`` values. ``loading`` reads the file at its first mistake, as start-up and a reload
must; ``checking`` lists every mistake, each on its line (``runbroker check``);
``notify_config`` and ``notify_secret`` read the ``[notify]`` tables. It reads the user's
files, imports the user's handler modules and, for a ``url_env``, reads the environment:
none of which the core does. The rest of the daemon imports these names from here."""

from daemon.taskfile.loading import (
    build_registry,
    load_handler,
    parse_tasks_toml,
    tasks_from_bytes,
)
from daemon.taskfile.tasks_file import TASKS_FILE_MAX_BYTES, TaskConfigError, read_tasks_file

__all__ = [
    "TASKS_FILE_MAX_BYTES",
    "TaskConfigError",
    "build_registry",
    "load_handler",
    "parse_tasks_toml",
    "read_tasks_file",
    "tasks_from_bytes",
]
