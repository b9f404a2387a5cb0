"""``runbroker check``: every problem of a tasks file, each with the line it is on.

The loader (``loading``) stops at a file's first mistake, as start-up and a reload must; a
check goes on to the next task, so that one run in CI lists them all. The words are the
loader's: a TOML syntax error stops the check (nothing after it can be read), a task's mistake
is its ``task_from_table`` error, placed on the line of the key it names, else of the task's
table.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from daemon.core.tasks.loading import task_from_table
from daemon.core.tasks.notify_config import NOTIFY_TABLE, parse_notify_table
from daemon.core.tasks.tasks_file import TaskConfigError, read_tasks_file

_TOML_LINE = re.compile(r"\(at line ([0-9]+), column [0-9]+\)")
_UNKNOWN_KEY = re.compile(r"unknown key '([^']*)'")
_WORD = re.compile(r"[a-z_]+")
_ABOUT = {"zone": "tz", "import": "handler"}  # the key a message is about, when it says not
_TABLE = re.compile(r"\s*\[")
_KEY = re.compile(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')\s*=")


@dataclass(frozen=True)
class Problem:
    """One mistake of a tasks file: its ``line`` (1-based; None: the file as a whole)."""

    line: int | None
    message: str

    def text(self, source: str) -> str:
        """``FILE:LINE: message``, the form compilers and CI annotations read."""
        where = source if self.line is None else f"{source}:{self.line}"
        return f"{where}: {self.message}"


def check_tasks_file(path: Path) -> list[Problem]:
    """Every problem of the tasks file at ``path`` (empty: the daemon would take it)."""
    try:
        data = read_tasks_file(path)
    except FileNotFoundError:
        return [Problem(None, "no such file")]
    except TaskConfigError as exc:
        return [Problem(None, str(exc).removeprefix(f"tasks file {path}: "))]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [Problem(None, "not valid UTF-8")]
    return check_tasks_text(text)


def check_tasks_text(text: str) -> list[Problem]:
    """Every problem of a tasks file's text."""
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
    lines = text.splitlines()
    problems = [
        Problem(_table_line(lines, name), f"unknown table {name!r}")
        for name in document
        if name not in ("tasks", NOTIFY_TABLE)
    ]
    try:
        parse_notify_table(NOTIFY_TABLE, document.get(NOTIFY_TABLE))
    except TaskConfigError as exc:
        table = str(exc).partition(":")[0].split(".")  # notify.webhook: ... -> its header
        line = _table_line(lines, *table) or _table_line(lines, NOTIFY_TABLE)
        problems.append(Problem(line, str(exc)))
    tables = document.get("tasks", {})
    if not isinstance(tables, dict):
        return [*problems, Problem(_table_line(lines, "tasks"), "'tasks' must be a table")]
    for name, table in tables.items():
        if not isinstance(table, dict):
            problems.append(
                Problem(_table_line(lines, "tasks", name), f"tasks.{name} must be a table")
            )
            continue
        try:
            task_from_table(name, table)
        except TaskConfigError as exc:
            message = str(exc)
            problems.append(Problem(_line_of(lines, name, message), message))
    return problems


def _line_of(lines: list[str], task: str, message: str) -> int | None:
    """The line of the key the loader's ``message`` is about in the task's table (an unknown
    key by its name, else the first key the message names), else of the table's header."""
    header = _table_line(lines, "tasks", task)
    if header is None:
        return None
    unknown = _UNKNOWN_KEY.search(message)
    words = set(_WORD.findall(message.partition(": ")[2]))
    words |= {key for word, key in _ABOUT.items() if word in words}
    for number in range(header, len(lines)):  # the lines after the header, 0-based
        line = lines[number]
        if _TABLE.match(line):
            break
        found = _KEY.match(line)
        if found is None:
            continue
        key = found[1].strip("\"'")
        if (key == unknown[1]) if unknown else (key in words):
            return number + 1
    return header


def _table_line(lines: list[str], *names: str) -> int | None:
    """The line of the ``[a.b]`` header naming ``names`` (quoted or bare), if there is one."""
    parts = [rf"\s*(?:{re.escape(n)}|\"{re.escape(n)}\"|'{re.escape(n)}')\s*" for n in names]
    header = re.compile(r"\s*\[" + r"\.".join(parts) + r"\]")
    for number, line in enumerate(lines, start=1):
        if header.match(line):
            return number
    return None
