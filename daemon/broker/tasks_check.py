"""Whether the daemon takes a tasks file: the one check of start-up, every reload, a reload's dry
run and ``runbroker check``, so that none of them can pass a file another refuses.

Beyond the loader's (``taskfile``: the TOML, each task, the ``[notify]`` defaults, the command
line's ``default``), the daemon refuses a file that leaves it no task at all, and with a
database one whose graces break the fencing rule. The ticker's plans come with it, and the
warnings of the intervals they clamp (``ticking``), said wherever the file is checked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from daemon.broker.ticking import tick_plans
from daemon.core.tasks import Task, TaskRegistry
from daemon.core.ticker.ticker import TickPlan
from daemon.settings import Settings
from daemon.taskfile import TaskConfigError, tasks_from_bytes
from daemon.taskfile.checking import Problem, file_problems, line_of
from daemon.taskfile.key_lines import key_lines
from daemon.taskfile.loading import tasks_file_bytes

NO_TASKS = (
    "no tasks: give a command after '--', set RUNBROKER_COMMAND, or define tasks in "
    "RUNBROKER_TASKS_FILE"
)


@dataclass(frozen=True)
class TakenTasks:
    """A file the daemon takes: its tasks, the ticker's plans of them, their warnings."""

    tasks: dict[str, Task]
    plans: list[TickPlan]
    warnings: list[str]


def take_tasks(
    settings: Settings, default_command: tuple[str, ...], data: bytes | None, source: str
) -> TakenTasks:
    """The tasks of a tasks file's ``data`` (None: no file) as the daemon takes them, or a
    ``TaskConfigError`` saying why it would not start (or reload) with them."""
    tasks = tasks_from_bytes(data, source, default_command)
    if not tasks:
        raise TaskConfigError(NO_TASKS)
    if settings.database_dsn():
        from daemon.pg.fence import fencing_problem, graces_s

        own = {name: task.grace_s for name, task in tasks.items()}
        problem = fencing_problem(settings.lease_s, graces_s(settings.grace_s, own))
        if problem is not None:
            culprit = next((n for n in own if f"the grace of task {n} (" in problem), None)
            raise TaskConfigError(problem, () if culprit is None else ("tasks", culprit, "grace"))
    plans, warnings = tick_plans(settings, TaskRegistry(dict(tasks)))
    return TakenTasks(tasks, plans, warnings)


@dataclass(frozen=True)
class FileCheck:
    """``runbroker check``'s findings: none of ``problems`` when the daemon takes the file;
    ``warnings``, what it would warn of when it does (an interval it clamps)."""

    problems: list[Problem]
    warnings: list[Problem]


def check_file(settings: Settings, default_command: tuple[str, ...], path: Path) -> FileCheck:
    """Every problem of the tasks file at ``path`` on its line, then, when it shows none by
    itself, ``take_tasks``'s verdict on it: a problem exactly when the daemon would not start
    with it, the warnings it would log when it would."""
    data, problems = file_problems(path)
    if problems or data is None:
        return FileCheck(problems, [])
    try:
        taken = take_tasks(settings, default_command, data, str(path))
    except TaskConfigError as exc:
        message = str(exc).removeprefix(f"{path}: ")
        return FileCheck([Problem(_line(data, exc.key), message)], [])
    except Exception as exc:  # a handler module's own exception, as a reload says it
        return FileCheck([Problem(None, f"{type(exc).__name__}: {exc}")], [])
    warnings = []
    for warning in taken.warnings:
        task = next((t for t in taken.tasks if warning.startswith(f"tasks.{t}: interval")), None)
        key = () if task is None else ("tasks", task, "interval")
        warnings.append(Problem(_line(data, key), f"warning: {warning}"))
    return FileCheck([], warnings)


def _line(data: bytes, key: tuple[str, ...]) -> int | None:
    return line_of(key_lines(data.decode("utf-8")), key) if key else None


def startup_tasks(
    settings: Settings, default_command: tuple[str, ...]
) -> tuple[TaskRegistry, TakenTasks]:
    """``runbroker run``'s tasks: the file of ``RUNBROKER_TASKS_FILE`` (the default path may be
    absent) through ``take_tasks``, as the registry every part shares, with the digest of the
    bytes they came from (a reload compares it), and what was taken (the ticker's plans, made
    once). ``TaskConfigError`` when it would not start."""
    data = tasks_file_bytes(settings.tasks_file, settings.tasks_file_required)
    taken = take_tasks(settings, default_command, data, str(settings.tasks_file))
    registry = TaskRegistry(taken.tasks)
    registry.source_digest = None if data is None else hashlib.sha256(data).hexdigest()
    return registry, taken
