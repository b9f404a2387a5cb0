"""One reload of the tasks file, all or nothing, and its record for ``status`` and ``health``.

The file is checked as start-up checks it before anything is swapped, so a bad file (any
exception included) leaves the old tasks running and says why once. The check runs off the
event loop (``off_loop``), which goes on answering meanwhile; the swap is done on the loop in
one step, and the new plans' loops start a turn's worth at a time (``Ticker.started``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.broker.reload.asking import ReloadRequests
from daemon.broker.reload.off_loop import (
    keep_out_of_collections,
    no_collections,
    off_the_loop,
)
from daemon.broker.tasks_check import take_tasks
from daemon.core.subscribers import Subscribers
from daemon.core.tasks import Task, TaskChanges, TaskRegistry, compare_tasks
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.log.logs import get_logger
from daemon.settings import Settings
from daemon.taskfile import TaskConfigError, read_tasks_file
from daemon.wire.control_answers import reload_answer
from daemon.wire.control_shapes import ReloadStatus
from daemon.wire.reasons import CODE_RELOAD_REFUSED, CODE_SHUTTING_DOWN, REASON_CLOSED

log = get_logger("runbroker.reload")

WATCH_INOTIFY = "inotify"  # status: the file is watched
WATCH_SIGNAL = "signal"  # inotify unavailable: SIGHUP and `runbroker reload` only
WATCH_NONE = "none"  # no tasks file: nothing to reload
WATCH_LOST = "lost"  # the watched directory went away: SIGHUP or `runbroker reload` re-arm it
LOGGED_NAMES = 100  # names of each kind in a ``tasks.reloaded`` line; its counts say them all
NO_TASKS_FILE = (
    "no tasks file to reload (RUNBROKER_TASKS_FILE is not set and the default tasks file did "
    "not exist at start)"
)


Checked = tuple[dict[str, Any], list[TickPlan], list[str]]  # tasks, their plans, warnings


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    reason: str = ""  # why it was refused
    changes: TaskChanges | None = None
    code: str = CODE_RELOAD_REFUSED  # the reason's code, when refused


class TaskReloader:
    def __init__(
        self,
        settings: Settings,
        registry: TaskRegistry,
        ticker: Ticker,
        default_command: tuple[str, ...],
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.ticker = ticker  # its queue is the one the reload's new plans submit into
        self.default_command = default_command
        self.path: Path | None = settings.tasks_file
        if not settings.tasks_file_required and not settings.tasks_file.exists():
            self.path = None  # the default path, absent at start: no tasks file
        self.watch = WATCH_NONE if self.path is None else WATCH_SIGNAL
        # After each swap; one that raises never undoes a good reload.
        self.listeners: Subscribers[TaskChanges] = Subscribers("tasks.reloaded")
        # After each swap too, in a thread of their own: thread-safe, and slow for thousands
        # of tasks (the metrics' new series: seconds for 18,000).
        self.listeners_off_loop: Subscribers[TaskChanges] = Subscribers("tasks.reloaded")
        self.fence_widen: Callable[[float], None] | None = None  # the runner's, with a database
        self.resync_watch: Callable[[], bool] | None = None  # the file watch's, when it runs
        self.outcomes: Subscribers[bool] = Subscribers("tasks.reload_outcome")  # after each
        self.file_changed = asyncio.Event()
        self.requests = ReloadRequests()  # clients' reloads and dry runs, answered in turn
        self._digest = registry.source_digest  # of the bytes the tasks came from
        self.last_at: float | None = None
        self.last: ReloadOutcome | None = None
        self.last_source = ""
        self.last_failed_at: float | None = None  # the last refused reload, and why
        self.last_error: str | None = None

    def changed_since_read(self) -> bool:
        """The file's bytes differ from those last read (a change before the watch began)."""
        try:
            data = None if self.path is None else read_tasks_file(self.path)
        except (OSError, TaskConfigError):
            return True  # gone, unreadable or not a file to read: a reload says so
        return data is not None and hashlib.sha256(data).hexdigest() != self._digest

    # -- one reload ---------------------------------------------------------------------------
    async def reload(self, source: str, *, only_if_changed: bool = False) -> ReloadOutcome | None:
        """Reload now (``source``: signal, file, request); one at a time (``reload_forever``).

        None when ``only_if_changed`` and the file's bytes are those last seen."""
        if self.path is None:
            return ReloadOutcome(False, NO_TASKS_FILE)
        if self.ticker.queue.closed:
            return ReloadOutcome(False, REASON_CLOSED, code=CODE_SHUTTING_DOWN)
        if self.resync_watch is not None and source != "file":
            self.resync_watch()  # a lost watch is re-armed by SIGHUP and `runbroker reload`
        data = self.read_file()
        if isinstance(data, str):
            self._digest = None  # the same bytes coming back are a change
            return self._refused(source, data)
        digest = hashlib.sha256(data).hexdigest()
        failed_last = self.last is not None and not self.last.ok
        if only_if_changed and digest == self._digest and not failed_last:
            return None
        self._digest = digest
        running = self.registry.tasks  # swapped whole by a reload, never changed in place
        with no_collections():
            prepared = await off_the_loop(lambda: self._prepare(data, running))
            if isinstance(prepared, str):
                return self._refused(source, prepared)
            if self.ticker.queue.closed:  # the daemon began to stop while the file was checked
                return ReloadOutcome(False, REASON_CLOSED, code=CODE_SHUTTING_DOWN)
            (tasks, plans, warnings), compared = prepared
            if self.registry.tasks is not running:  # replaced meanwhile: compared again
                compared = compare_tasks(self.registry.tasks, tasks)
            changes = self._swap(tasks, plans, warnings, compared)
            await self.ticker.started()  # the new plans tick: answered once they do
            if self.listeners_off_loop:
                await off_the_loop(functools.partial(self.listeners_off_loop.tell, changes))
            keep_out_of_collections()
        outcome = self._record(source, ReloadOutcome(True, changes=changes))
        self.listeners.tell(changes)
        log.info(
            "tasks.reloaded",
            file=str(self.path),
            source=source,
            **changes.counts(),
            added_tasks=list(changes.added[:LOGGED_NAMES]),
            removed_tasks=list(changes.removed[:LOGGED_NAMES]),
            changed_tasks=list(changes.changed[:LOGGED_NAMES]),
        )
        return outcome

    def read_file(self) -> bytes | str:
        """The tasks file's bytes, or why they cannot be read (a ``str``)."""
        assert self.path is not None
        try:
            return read_tasks_file(self.path)
        except FileNotFoundError:
            return f"tasks file {self.path} does not exist"
        except TaskConfigError as exc:
            return str(exc)

    def _prepare(
        self, data: bytes, running: Mapping[str, Task]
    ) -> tuple[Checked, TaskChanges] | str:
        """``check`` of ``data`` and how its tasks differ from ``running``: a reload's work
        before the swap, done in a thread of its own."""
        checked = self.check(data)
        if isinstance(checked, str):
            return checked
        return checked, compare_tasks(running, checked[0])

    def check(self, data: bytes, source: str | None = None) -> Checked | str:
        """The tasks of the file's ``data`` and the ticker's plans of them, checked by start-up's
        own check (``tasks_check``, with their interval warnings), or why the file is refused.
        ``source`` names the file (None: the tasks file). It reads nothing the loop changes: it
        runs in a thread of its own."""
        importlib.invalidate_caches()  # a handler module added since start-up is found
        try:
            source = str(self.path) if source is None else source
            taken = take_tasks(self.settings, self.default_command, data, source)
        except TaskConfigError as exc:
            return str(exc)
        except BaseException as exc:  # synchronous code: never a real cancellation
            # Whatever the file's checks raise, a handler module's KeyboardInterrupt or
            # GeneratorExit included, refuses this file: it must never end PID 1.
            return f"{type(exc).__name__}: {exc}"
        return taken.tasks, taken.plans, taken.warnings

    def _swap(
        self,
        tasks: dict[str, Any],
        plans: list[Any],
        warnings: list[str],
        changes: TaskChanges,
    ) -> TaskChanges:
        """Put the checked tasks and their plans in place. Nothing here refuses."""
        changes = self.registry.replace(tasks, changes)
        for warning in warnings:
            log.warning("settings.interval", warning=warning)
        self.ticker.replace_plans(plans)
        if self.fence_widen is not None:
            self.fence_widen(max(self._graces_s(tasks).values()))
        return changes

    def _graces_s(self, tasks: dict[str, Any]) -> dict[str, float]:
        from daemon.pg.fence import graces_s

        return graces_s(self.settings.grace_s, {n: t.grace_s for n, t in tasks.items()})

    def named(self, reason: str, source: str | None = None) -> str:
        """A refusal's reason, naming the file (``source``; None: the tasks file)."""
        source = str(self.path) if source is None else source
        return reason if source in reason else f"tasks file {source}: {reason}"

    def _refused(self, source: str, reason: str) -> ReloadOutcome:
        reason = self.named(reason)
        log.error("tasks.reload_refused", file=str(self.path), source=source, error=reason)
        self.last_failed_at, self.last_error = time.time(), reason
        return self._record(source, ReloadOutcome(False, reason))

    def _record(self, source: str, outcome: ReloadOutcome) -> ReloadOutcome:
        self.last_at, self.last, self.last_source = time.time(), outcome, source
        self.outcomes.tell(outcome.ok)
        return outcome

    def watch_state(self, watching: bool) -> None:
        """The file watch says whether it still watches (``TasksFileWatcher.on_state``)."""
        self.watch = WATCH_INOTIFY if watching else WATCH_LOST

    async def answer(self) -> dict[str, Any]:
        """``runbroker reload``: reload now, and the outcome as the wire answers it."""
        try:
            outcome = await self.reload("request")
        except Exception as exc:  # a bug past the checks: still an answer, never a dead socket
            log.exception("tasks.reload_crashed", source="request")
            return reload_answer(False, f"reload failed: {type(exc).__name__}: {exc}", None)
        assert outcome is not None  # always reloaded when asked
        changes = outcome.changes
        names = changes.names() if changes else None
        return reload_answer(outcome.ok, outcome.reason, names, outcome.code)

    # -- what status and health say -----------------------------------------------------------
    def status(self) -> ReloadStatus:
        last = self.last
        return {
            "tasks_file": None if self.path is None else str(self.path),
            "watch": self.watch,
            "last_at": _iso(self.last_at),
            "last_source": self.last_source or None,
            "last_ok": None if last is None else last.ok,
            "last_changes": None if last is None or last.changes is None else last.changes.counts(),
            "last_error": self.last_error,
            "last_failed_at": _iso(self.last_failed_at),
        }

    def health_warnings(self) -> list[str]:
        warnings = []
        if self.watch == WATCH_LOST:
            warnings.append(
                f"the watch of the tasks file's directory {self.path and self.path.parent} was "
                "lost: changes are not seen until SIGHUP or `runbroker reload` re-arms it"
            )
        last = self.last
        if last is not None and not last.ok:
            failed = "the last reload of the tasks file failed, the old tasks still run: "
            warnings.append(failed + last.reason)
        return warnings


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()
