"""``runbroker check``: every problem of a tasks file, each with the line it is on.

The loader (``loading``) stops at a file's first mistake, as start-up and a reload must; a
check goes on to the next task, so that one run in CI lists them all. The words are the
loader's: a TOML syntax error stops the check (nothing after it can be read), a task's mistake
is its ``task_from_table`` (or ``[notify]`` defaults') error, placed on the line of the key it
is about (``key_lines``), else of the nearest table around it. Whether the daemon takes a file
with no such problem is ``daemon.broker.tasks_check``'s to say, the daemon's own check.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.taskfile.key_lines import KeyPath, key_lines
from daemon.taskfile.loading import task_from_table
from daemon.taskfile.notify_config import NOTIFY_TABLE, parse_notify_table, with_defaults
from daemon.taskfile.tasks_file import TaskConfigError, read_tasks_file

_TOML_LINE = re.compile(r"\(at line ([0-9]+), column [0-9]+\)")
_UNKNOWN_KEY = re.compile(r"unknown key '([^']*)'")
_WORD = re.compile(r"[A-Za-z0-9_-]+")
_TABLES = ("tasks", NOTIFY_TABLE)


@dataclass(frozen=True)
class Problem:
    """One mistake of a tasks file: its ``line`` (1-based; None: the file as a whole)."""

    line: int | None
    message: str

    def text(self, source: str) -> str:
        """``FILE:LINE: message``, the form compilers and CI annotations read."""
        where = source if self.line is None else f"{source}:{self.line}"
        return f"{where}: {self.message}"


def file_problems(path: Path) -> tuple[bytes | None, list[Problem]]:
    """The bytes of the tasks file at ``path`` (None: none to read) and its problems."""
    try:
        data = read_tasks_file(path)
    except FileNotFoundError:
        return None, [Problem(None, "no such file")]
    except TaskConfigError as exc:
        return None, [Problem(None, str(exc).removeprefix(f"tasks file {path}: "))]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data, [Problem(None, "not valid UTF-8")]
    return data, check_tasks_text(text)


def check_tasks_text(text: str) -> list[Problem]:
    """Every problem of a tasks file's text, each on the line of the key it is about."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_LINE.search(str(exc))
        if match is not None:
            return [Problem(int(match[1]), str(exc))]
        at_end = "at end of document" in str(exc)
        return [Problem(max(len(text.splitlines()), 1) if at_end else None, str(exc))]
    except RecursionError:
        return [Problem(None, "nested too deeply (RecursionError)")]
    found: list[tuple[KeyPath, str]] = [
        ((name,), f"unknown table {name!r}") for name in document if name not in _TABLES
    ]
    defaults = document.get(NOTIFY_TABLE)
    try:
        parse_notify_table(NOTIFY_TABLE, defaults)
    except TaskConfigError as exc:
        found.append((named_key(str(exc), document, ()), str(exc)))
        defaults = None  # said once, not again at each task
    tables = document.get("tasks", {})
    if not isinstance(tables, dict):
        found.append((("tasks",), "'tasks' must be a table"))
        tables = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            found.append((("tasks", name), f"tasks.{name} must be a table"))
            continue
        try:
            with_defaults({name: task_from_table(name, table)}, defaults, "")
        except TaskConfigError as exc:
            key = exc.key or named_key(str(exc), document, ("tasks", name))
            found.append((key, str(exc)))
    if not found:
        return []
    lines = key_lines(text)
    return [Problem(line_of(lines, key), message) for key, message in found]


def named_key(message: str, document: Mapping[str, Any], table: KeyPath) -> KeyPath:
    """The key a message of the ``[notify]`` tables names, by their words' form: ``WHERE: KEY
    ...`` or ``WHERE: unknown key 'KEY'``, WHERE a table at or under ``table`` (its dotted
    path); else that table."""
    where, _, said = message.partition(": ")
    prefix = ".".join(table)
    if not where.startswith(prefix):
        return table
    below = where[len(prefix) :].strip(".")
    path = (*table, *below.split(".")) if below else table
    unknown = _UNKNOWN_KEY.search(said)
    if unknown is not None:
        return (*path, unknown[1])
    value: Any = document
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    first = _WORD.match(said)
    if first is not None and isinstance(value, dict) and first[0] in value:
        return (*path, first[0])
    return path


def line_of(lines: Mapping[KeyPath, int], key: KeyPath) -> int | None:
    """The line of ``key``, else of the nearest table it is in that has one."""
    for end in range(len(key), 0, -1):
        line = lines.get(key[:end])
        if line is not None:
            return line
    return None
