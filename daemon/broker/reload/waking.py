"""The loop that reloads the tasks file, woken by SIGHUP, by the file watch and by clients'
requests (``asking``), one reload or dry run at a time.

A burst of events is debounced into one reload. A reload that fails in a way nobody foresaw is
logged and the loop goes on, so it never ends the daemon.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from daemon.broker.reload.asking import Asked
from daemon.broker.reload.dry_run import dry_run_answer
from daemon.broker.reload.reloader import WATCH_INOTIFY, TaskReloader
from daemon.broker.reload.watcher import TasksFileWatcher
from daemon.log.logs import get_logger
from daemon.wire.control_answers import reload_plan_answer

log = get_logger("runbroker.reload")

DEBOUNCE_S = 0.2  # a burst of file events closer than this is one reload
DEBOUNCE_MAX_S = 2.0  # ... but a directory that never goes quiet is reloaded after this


def start_watching(reloader: TaskReloader) -> TasksFileWatcher | None:
    """The file watch, started before the daemon says it is ready so that no later change is missed.

    None without a tasks file or without inotify (logged once)."""
    if reloader.path is None:
        return None
    watcher = TasksFileWatcher(reloader.path, reloader.file_changed.set, reloader.watch_state)
    started: TasksFileWatcher | None = watcher
    try:
        watcher.start(asyncio.get_running_loop())
    except OSError as exc:  # inotify.InotifyUnavailable among them
        log.warning("reload.no_file_watch", reason=str(exc), reload_with="SIGHUP")
        started = None
    else:
        reloader.watch = WATCH_INOTIFY
        reloader.resync_watch = watcher.resync
    # A change between reading the tasks at start and now (the watch sees those after it):
    # reloaded by the loop, with or without a watch.
    if reloader.changed_since_read():
        reloader.file_changed.set()
    return started


async def reload_forever(
    reloader: TaskReloader,
    sighup: asyncio.Event,
    *,
    debounce_s: float = DEBOUNCE_S,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Reload on SIGHUP and on changes of the file, and answer clients' requests, until
    cancelled; then the requests still waiting are told that the daemon stops."""
    changed = reloader.file_changed
    requests = reloader.requests
    try:
        while True:
            await _any(sighup, changed, requests.arrived)
            asked = requests.take()
            if asked is not None:
                asked.give(await _answer(reloader, asked))
                continue
            if not (sighup.is_set() or changed.is_set()):
                continue
            await _quiet(changed, debounce_s, monotonic)
            forced = sighup.is_set()
            sighup.clear()
            source = "signal" if forced else "file"
            try:
                outcome = await reloader.reload(source, only_if_changed=not forced)
            except Exception:  # a bug of the reload itself: logged, and the next one is tried
                log.exception("tasks.reload_crashed", source=source)
                continue
            if outcome is not None and reloader.path is None:
                log.warning("tasks.reload_refused", source="signal", error=outcome.reason)
    finally:
        requests.close()


async def _answer(reloader: TaskReloader, asked: Asked) -> Mapping[str, Any]:
    """A client's reload or dry run, made now; a bug is an answer too, never a silent socket."""
    request = asked.request
    if not request.dry_run:
        return await reloader.answer()
    candidate = None if request.content is None else (request.file, request.content)
    try:
        return await dry_run_answer(reloader, datetime.now(UTC), candidate)
    except Exception as exc:
        log.exception("tasks.dry_run_crashed")
        return reload_plan_answer(False, f"dry run failed: {type(exc).__name__}: {exc}")


async def _quiet(changed: asyncio.Event, debounce_s: float, monotonic: Callable[[], float]) -> None:
    """Until the file's events pause for ``debounce_s`` (at most ``DEBOUNCE_MAX_S``)."""
    deadline = monotonic() + DEBOUNCE_MAX_S
    while monotonic() < deadline:
        changed.clear()
        try:
            async with asyncio.timeout(debounce_s):
                await changed.wait()
        except TimeoutError:
            return
    changed.clear()


async def _any(*events: asyncio.Event) -> None:
    """Until one of the events is set."""
    if any(event.is_set() for event in events):
        return
    async with asyncio.TaskGroup() as group:
        waits = [group.create_task(event.wait()) for event in events]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
