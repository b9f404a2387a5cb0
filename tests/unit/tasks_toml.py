"""A tasks file's text from plain mappings, for tests that say a task by its keys or a new file
by its changes to an old one; the file's own spelling is tested in tests/unit/taskfile."""

from __future__ import annotations

import json
from collections.abc import Mapping

Table = Mapping[str, object]


def tasks_toml(tasks: Mapping[str, Table]) -> str:
    """The tasks file with a ``[tasks.NAME]`` table a task: a value that is a mapping is a
    sub-table (``notify``, then ``notify.webhook``); every other value is written as JSON,
    whose strings, numbers, booleans and lists TOML reads alike."""
    lines: list[str] = []
    for name, keys in tasks.items():
        lines += _table(f"tasks.{name}", keys)
    return "\n".join(lines) + "\n"


def _table(header: str, keys: Table) -> list[str]:
    lines = [f"[{header}]"]
    tables = {key: value for key, value in keys.items() if isinstance(value, Mapping)}
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items() if key not in tables]
    for key, table in tables.items():
        lines += _table(f"{header}.{key}", table)
    return lines
