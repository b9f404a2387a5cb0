"""A task's busy keys in the tasks file: ``on_busy`` and ``start_deadline``, checked with the
file and line of a bad value (``tasks.toml:12: tasks.report: on_busy ...``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemon.core.ticker.busy import ON_BUSY, OnBusy
from daemon.taskfile.key_lines import key_lines
from daemon.taskfile.tasks_file import TaskConfigError, duration_value


def _refused(text: str, source: str, task: str, key: str, message: str) -> TaskConfigError:
    """``FILE:LINE: tasks.TASK: KEY message`` (the line where the table sets it, when found);
    without a ``source``, ``tasks.TASK: KEY message`` as the loader's other messages
    (``runbroker check`` places those on their lines itself)."""
    path = ("tasks", task, key)
    place = f"tasks.{task}: {key}"
    if source:
        line = key_lines(text).get(path)
        place = f"{source}: {place}" if line is None else f"{source}:{line}: {place}"
    return TaskConfigError(f"{place}{message}", path)


def busy_keys(
    task: str, table: Mapping[str, Any], text: str, source: str
) -> tuple[OnBusy | None, float | None]:
    """The task's ``on_busy`` and ``start_deadline`` (seconds), None where unset."""
    on_busy: OnBusy | None = None
    if "on_busy" in table:
        value = table["on_busy"]
        if value not in ON_BUSY:
            choices = ", ".join(repr(choice) for choice in ON_BUSY)
            message = f" must be one of {choices}, got {value!r}"
            raise _refused(text, source, task, "on_busy", message)
        on_busy = value
    deadline_s: float | None = None
    if "start_deadline" in table:
        value = table["start_deadline"]
        try:
            deadline_s = duration_value("", value)
        except TaskConfigError as exc:
            raise _refused(text, source, task, "start_deadline", str(exc)) from None
        if "interval" not in table and "schedule" not in table and task != "default":
            message = " needs an 'interval' or a 'schedule' to apply to"
            raise _refused(text, source, task, "start_deadline", message)
    return on_busy, deadline_s
