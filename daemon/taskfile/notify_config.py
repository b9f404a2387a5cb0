"""Who hears about a task's runs: the ``[notify]`` table (every task's defaults) and each
``[tasks.NAME.notify]`` table, read into a ``TaskNotify``.

A task's table overrides the defaults kind by kind: its ``webhook``, ``ping`` or ``command``
table replaces the default one whole, ``false`` turns the default off for that task, and its
``max_silence`` replaces the default's (``"off"``: none; ``"auto"``: two of the task's own
cadences, for a task with an interval or a schedule). Every mistake is a
``TaskConfigError`` naming the table and the key, and never a URL's value.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeVar

from daemon.core.tasks.notify_targets import (
    ATTEMPTS,
    BACKOFF_S,
    CHANGE,
    COMMAND_TIMEOUT_S,
    EVENTS,
    HTTP_TIMEOUT_S,
    KINDS,
    PING_EVENTS,
    CommandHook,
    HttpTarget,
    TaskNotify,
)
from daemon.taskfile.notify_secret import SECRET_KEYS, read_secret
from daemon.taskfile.tasks_file import TaskConfigError, duration_value

NOTIFY_TABLE = "notify"
DEFAULT_ON = {
    "webhook": frozenset({"failure", "recovery", "silence"}),
    "ping": PING_EVENTS,
    "command": frozenset({"failure", "recovery", "silence"}),
}
ATTEMPTS_MAX = 10
TIMEOUT_MAX_S = 60.0  # an attempt's (or the command's) own timeout, at most
_HTTP_KEYS = {*SECRET_KEYS, "on", "timeout", "attempts", "backoff"}
_COMMAND_KEYS = {"command", "on", "timeout"}
_TABLE_KEYS = {*KINDS, "max_silence"}
_T = TypeVar("_T")


def parse_notify_table(where: str, table: Any) -> TaskNotify | None:
    """A ``[notify]`` or ``[tasks.NAME.notify]`` table (``where`` names it); None: absent."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TaskConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - _TABLE_KEYS)
    if unknown:
        raise TaskConfigError(f"{where}: unknown key {unknown[0]!r}")
    off = {kind for kind in (*KINDS, "max_silence") if table.get(kind) is False}
    silence = table.get("max_silence")
    max_silence_s = None
    if silence == "off":
        off.add("max_silence")
    elif silence == "auto":
        pass
    elif silence is not None and silence is not False:
        max_silence_s = _duration(where, "max_silence", silence)
    webhook = _http_target(f"{where}.webhook", "webhook", table.get("webhook"))
    ping = _http_target(f"{where}.ping", "ping", table.get("ping"))
    command = _command_hook(f"{where}.command", table.get("command"))
    return TaskNotify(
        webhook=webhook,
        ping=ping,
        command=command,
        max_silence_s=max_silence_s,
        max_silence_auto=silence == "auto",
        off=frozenset(off),
    )


def _kind_table(where: str, kind: str, table: Any) -> dict[str, Any] | None:
    """A kind's table, its keys checked (None: absent, or ``false``)."""
    if table is None or table is False:
        return None
    if not isinstance(table, dict):
        raise TaskConfigError(f"{where}: must be a table, or false to turn the default off")
    unknown = sorted(set(table) - (_COMMAND_KEYS if kind == "command" else _HTTP_KEYS))
    if unknown:
        raise TaskConfigError(f"{where}: unknown key {unknown[0]!r}")
    return table


def _timeout_s(where: str, table: Mapping[str, Any], default_s: float) -> float:
    timeout_s = _duration(where, "timeout", table.get("timeout"), default_s)
    if timeout_s > TIMEOUT_MAX_S:
        raise TaskConfigError(f"{where}: timeout must be at most {TIMEOUT_MAX_S:g}s")
    return timeout_s


def _command_hook(where: str, value: Any) -> CommandHook | None:
    table = _kind_table(where, "command", value)
    if table is None:
        return None
    on = _events(where, "command", table.get("on"))
    timeout_s = _timeout_s(where, table, COMMAND_TIMEOUT_S)
    return CommandHook(_argv(where, table.get("command")), on, timeout_s)


def _http_target(where: str, kind: str, value: Any) -> HttpTarget | None:
    table = _kind_table(where, kind, value)
    if table is None:
        return None
    on = _events(where, kind, table.get("on"))
    timeout_s = _timeout_s(where, table, HTTP_TIMEOUT_S)
    attempts = table.get("attempts", ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise TaskConfigError(f"{where}: attempts must be a whole number")
    if not 1 <= attempts <= ATTEMPTS_MAX:
        raise TaskConfigError(f"{where}: attempts must be from 1 to {ATTEMPTS_MAX}")
    backoff_s = _duration(where, "backoff", table.get("backoff"), BACKOFF_S)
    if backoff_s > TIMEOUT_MAX_S:
        raise TaskConfigError(f"{where}: backoff must be at most {TIMEOUT_MAX_S:g}s")
    return HttpTarget(read_secret(where, table), on, timeout_s, attempts, backoff_s)


def _events(where: str, kind: str, value: Any) -> frozenset[str]:
    if value is None:
        return DEFAULT_ON[kind]
    allowed = PING_EVENTS if kind == "ping" else frozenset((*EVENTS, CHANGE))
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TaskConfigError(f"{where}: on must be a list of events")
    for event in value:
        if event not in allowed:
            words = ", ".join(sorted(allowed))
            raise TaskConfigError(f"{where}: on: unknown event {event!r} (one of {words})")
    return frozenset(value)


def _argv(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise TaskConfigError(f"{where}: command: {exc}") from None
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        raise TaskConfigError(f"{where}: command must be a non-empty list of strings")
    return tuple(value)


def _duration(where: str, key: str, value: Any, default_s: float | None = None) -> float:
    if value is None and default_s is not None:
        return default_s
    return duration_value(f"{where}: {key}", value)


def merged(defaults: TaskNotify | None, own: TaskNotify | None) -> TaskNotify | None:
    """A task's notifications: its own table over the defaults, kind by kind (None: none)."""
    if defaults is None and own is None:
        return None
    base = defaults or TaskNotify()
    mine = own or TaskNotify()
    silence = mine if mine.max_silence_s is not None or mine.max_silence_auto else base
    if silence is base and "max_silence" in mine.off:
        silence = TaskNotify()
    result = TaskNotify(
        webhook=_pick(mine.webhook, base.webhook, "webhook" in mine.off),
        ping=_pick(mine.ping, base.ping, "ping" in mine.off),
        command=_pick(mine.command, base.command, "command" in mine.off),
        max_silence_s=silence.max_silence_s,
        max_silence_auto=silence.max_silence_auto,
    )
    return None if result.empty else result


def _pick(own: _T | None, default: _T | None, off: bool) -> _T | None:
    if own is not None:
        return own
    return None if off else default


def with_defaults(tasks: Mapping[str, Any], defaults_table: Any, source: str) -> dict[str, Any]:
    """``tasks`` (name -> ``Task``) with the ``[notify]`` defaults merged into each."""
    defaults = parse_notify_table(f"{source}: {NOTIFY_TABLE}", defaults_table)
    result = dict(tasks)
    for name, task in tasks.items():
        notify = merged(defaults, task.notify)
        if notify is not None and notify.max_silence_auto and not _ticks(task):
            if task.notify is not None and task.notify.max_silence_auto:
                raise TaskConfigError(
                    f"tasks.{name}.{NOTIFY_TABLE}: max_silence = 'auto' needs the task's own"
                    " interval or schedule"
                )
            notify = replace(notify, max_silence_auto=False)  # the default's: for ticking tasks
            notify = None if notify.empty else notify
        if notify != task.notify:
            result[name] = replace(task, notify=notify)
    return result


def _ticks(task: Any) -> bool:
    return task.interval_s is not None or task.schedule is not None
