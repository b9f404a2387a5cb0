"""Loading the container's tasks: the ``default`` command and the TOML tasks file.

A ``[tasks.NAME]`` table becomes a ``Task`` (a command, or a handler imported from
``module:function``), every mistake a ``TaskConfigError`` that names its place.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.core.tasks.registry import Handler, Task, TaskRegistry
from daemon.core.ticker.catchup import MISFIRE_COALESCE, MISFIRES
from daemon.schedules import parse_schedule
from daemon.taskfile.busy_keys import busy_keys
from daemon.taskfile.notify_config import NOTIFY_TABLE, parse_notify_table, with_defaults
from daemon.taskfile.tasks_file import TaskConfigError, duration_value, read_tasks_file

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def load_handler(ref: str, where: str) -> Handler:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise TaskConfigError(f"{where}: handler must be 'module:function', got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # ImportError, a SyntaxError, sys.exit(), KeyboardInterrupt
        # Import is synchronous: no real cancellation can arrive during it, so whatever the
        # module raised (GeneratorExit, CancelledError, its own BaseException) is its own fault.
        reason = f"{type(exc).__name__}: {exc}"
        raise TaskConfigError(f"{where}: cannot import {module_name!r}: {reason}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise TaskConfigError(f"{where}: {module_name!r} has no {attr!r}")
    if not inspect.iscoroutinefunction(target):
        raise TaskConfigError(f"{where}: handler {ref!r} must be an 'async def' function")
    handler: Handler = target
    return handler


_KEYS = {
    "command",
    "handler",
    "timeout",
    "soft_timeout",
    "grace",
    "allow_args",
    "allow_env",
    "interval",
    "schedule",
    "tz",
    "misfire",
    "catchup_window",
    "on_busy",
    "start_deadline",
    NOTIFY_TABLE,
}


def task_from_table(name: str, table: Mapping[str, Any], text: str = "", source: str = "") -> Task:
    """The task of one ``[tasks.NAME]`` table; ``TaskConfigError`` at its first mistake, with
    the path of the key it is about (with the file's ``text`` and ``source``, a busy key's
    message names its file and line)."""
    where = f"tasks.{name}"

    def refused(key: str | None, message: str) -> TaskConfigError:
        return TaskConfigError(f"{where}: {message}", ("tasks", name, *([key] if key else [])))

    if not TASK_NAME.fullmatch(name):
        raise refused(None, "invalid task name")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise refused(unknown[0], f"unknown key {unknown[0]!r}")
    command = table.get("command")
    handler_ref = table.get("handler")
    if (command is None) == (handler_ref is None):
        raise refused(None, "set exactly one of 'command' or 'handler'")
    argv: tuple[str, ...] = ()
    handler: Handler | None = None
    if command is not None:
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as exc:
                raise refused("command", f"command: {exc}") from None
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) for part in command)
        ):
            raise refused("command", "command must be a non-empty list of strings")
        argv = tuple(command)
    else:
        if not isinstance(handler_ref, str):
            raise refused("handler", "handler must be a string 'module:function'")
        try:
            handler = load_handler(handler_ref, where)
        except TaskConfigError as exc:
            raise TaskConfigError(str(exc), ("tasks", name, "handler")) from None
    allow_args = table.get("allow_args", False)
    if not isinstance(allow_args, bool):
        raise refused("allow_args", "allow_args must be true or false")
    allow_env = table.get("allow_env", [])
    if not isinstance(allow_env, list) or not all(
        isinstance(item, str) and ENV_NAME.fullmatch(item) for item in allow_env
    ):
        raise refused("allow_env", "allow_env must be a list of variable names")
    durations = {}
    for key in ("timeout", "soft_timeout", "grace", "interval", "catchup_window"):
        if key in table:
            try:
                durations[key] = duration_value(
                    f"{where}: {key}", table[key], zero_ok=key == "grace"
                )
            except TaskConfigError as exc:
                raise TaskConfigError(str(exc), ("tasks", name, key)) from None
    schedule = None
    if "schedule" in table:
        spec, tz = table["schedule"], table.get("tz", "UTC")
        if not isinstance(spec, str) or not isinstance(tz, str):
            raise refused(
                "schedule" if not isinstance(spec, str) else "tz", "schedule and tz must be strings"
            )
        try:
            schedule = parse_schedule(spec, tz)
        except ValueError as exc:
            zone = str(exc).startswith("unknown time zone") and "tz" in table
            raise refused("tz" if zone else "schedule", str(exc)) from None
        if "interval" in durations:
            raise refused("schedule", "set either 'interval' or 'schedule', not both")
    elif "tz" in table:
        raise refused("tz", "'tz' needs a 'schedule'")
    misfire = table.get("misfire", MISFIRE_COALESCE)
    if misfire not in MISFIRES:
        raise refused("misfire", f"misfire must be one of {', '.join(map(repr, MISFIRES))}")
    catching_up = "misfire" in table or "catchup_window" in durations
    if catching_up and schedule is None and "interval" not in durations:
        raise refused(
            "misfire" if "misfire" in table else "catchup_window",
            "'misfire' and 'catchup_window' need an interval or schedule",
        )
    on_busy, start_deadline_s = busy_keys(name, table, text, source)
    return Task(
        name=name,
        command=argv,
        handler=handler,
        handler_ref=handler_ref or "",
        allow_args=allow_args,
        allow_env=frozenset(allow_env),
        timeout_s=durations.get("timeout"),
        soft_timeout_s=durations.get("soft_timeout"),
        grace_s=durations.get("grace"),
        interval_s=durations.get("interval"),
        schedule=schedule,
        misfire=misfire,
        catchup_window_s=durations.get("catchup_window"),
        on_busy=on_busy,
        start_deadline_s=start_deadline_s,
        notify=parse_notify_table(f"{where}.{NOTIFY_TABLE}", table.get(NOTIFY_TABLE)),
    )


def parse_tasks_toml(text: str, source: str = "tasks file") -> dict[str, Task]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskConfigError(f"{source}: {exc}") from None
    except RecursionError:  # arrays or tables nested thousands deep: tomllib recurses
        raise TaskConfigError(f"{source}: nested too deeply (RecursionError)") from None
    unknown = sorted(set(document) - {"tasks", NOTIFY_TABLE})
    if unknown:
        raise TaskConfigError(f"{source}: unknown table {unknown[0]!r}", (unknown[0],))
    tables = document.get("tasks", {})
    if not isinstance(tables, dict):
        raise TaskConfigError(f"{source}: 'tasks' must be a table", ("tasks",))
    tasks = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise TaskConfigError(f"{source}: tasks.{name} must be a table", ("tasks", name))
        tasks[name] = task_from_table(name, table, text, source)
    return with_defaults(tasks, document.get(NOTIFY_TABLE), source)


def tasks_file_bytes(tasks_file: Path | None, file_required: bool) -> bytes | None:
    """The tasks file's bytes, or None when there is none (and none is required)."""
    if tasks_file is None:
        return None
    try:
        return read_tasks_file(tasks_file)
    except FileNotFoundError:
        if file_required:
            raise TaskConfigError(f"tasks file {tasks_file} does not exist") from None
        return None


def tasks_from_bytes(
    data: bytes | None, source: str, default_command: tuple[str, ...]
) -> dict[str, Task]:
    """The tasks of a tasks file's bytes (None: no file) plus ``default`` from the command.

    ``TaskConfigError`` names ``source`` (and the line, for TOML syntax) at the first mistake."""
    tasks: dict[str, Task] = {}
    if data is not None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise TaskConfigError(f"tasks file {source}: not valid UTF-8") from None
        tasks = parse_tasks_toml(text, source)
    return _with_default(tasks, default_command)


def _with_default(tasks: dict[str, Task], default_command: tuple[str, ...]) -> dict[str, Task]:
    """``tasks`` and the task ``default`` of the command line (when there is one)."""
    if default_command:
        if "default" in tasks:
            raise TaskConfigError(
                "task 'default' is defined both by the command line and by the tasks file",
                ("tasks", "default"),
            )
        tasks["default"] = Task(name="default", command=default_command)
    return tasks


def build_registry(
    default_command: tuple[str, ...], tasks_file: Path | None, *, file_required: bool = False
) -> TaskRegistry:
    """The container's tasks (the tasks file, if present, plus ``default`` from the command) as
    the registry every part of the daemon shares, with the digest of the file's bytes the tasks
    came from (a reload compares it)."""
    data = tasks_file_bytes(tasks_file, file_required)
    registry = TaskRegistry(tasks_from_bytes(data, str(tasks_file), default_command))
    registry.source_digest = None if data is None else hashlib.sha256(data).hexdigest()
    return registry
