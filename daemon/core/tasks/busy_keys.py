"""A task's busy keys in the tasks file: ``on_busy`` and ``start_deadline``, checked with the
file and line of a bad value (``tasks.toml:12: tasks.report: on_busy ...``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from daemon.core.busy import ON_BUSY, OnBusy
from daemon.core.tasks.tasks_file import TaskConfigError, duration_value

_HEADER = re.compile(r"\s*\[\s*tasks\s*\.\s*(?:\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_.:-]+?))\s*\]")
_TABLE = re.compile(r"\s*\[")


def key_line(text: str, task: str, key: str) -> int | None:
    """The line (from 1) where ``[tasks.TASK]`` sets ``key``; None when it is not found there
    (a dotted or inline table: the message then names the file alone)."""
    inside = False
    assignment = re.compile(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            inside = task in header.groups()
        elif _TABLE.match(line):
            inside = False
        elif inside and assignment.match(line):
            return number
    return None


def _place(text: str, source: str, task: str, key: str) -> str:
    """``FILE:LINE: tasks.TASK: KEY``; without a ``source``, ``tasks.TASK: KEY`` as the
    loader's other messages (``runbroker check`` places those on their lines itself)."""
    if not source:
        return f"tasks.{task}: {key}"
    line = key_line(text, task, key)
    where = source if line is None else f"{source}:{line}"
    return f"{where}: tasks.{task}: {key}"


def busy_keys(
    task: str, table: Mapping[str, Any], text: str, source: str
) -> tuple[OnBusy | None, float | None]:
    """The task's ``on_busy`` and ``start_deadline`` (seconds), None where unset."""
    on_busy: OnBusy | None = None
    if "on_busy" in table:
        value = table["on_busy"]
        if value not in ON_BUSY:
            choices = ", ".join(repr(choice) for choice in ON_BUSY)
            raise TaskConfigError(
                f"{_place(text, source, task, 'on_busy')} must be one of {choices}, got {value!r}"
            )
        on_busy = value
    deadline_s: float | None = None
    if "start_deadline" in table:
        value = table["start_deadline"]
        place = _place(text, source, task, "start_deadline")
        deadline_s = duration_value(place, value)
        if "interval" not in table and "schedule" not in table and task != "default":
            raise TaskConfigError(f"{place} needs an 'interval' or a 'schedule' to apply to")
    return on_busy, deadline_s
