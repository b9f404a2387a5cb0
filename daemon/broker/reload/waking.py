"""The loop that reloads the tasks file, woken by SIGHUP and by the file watch.

A burst of events is debounced into one reload. A reload that fails in a way nobody foresaw is
logged and the loop goes on, so it never ends the daemon.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from daemon.broker.reload.reloader import WATCH_INOTIFY, TaskReloader
from daemon.broker.reload.watcher import TasksFileWatcher
from daemon.log.logs import get_logger

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
    """Reload on SIGHUP and on changes of the file, until cancelled."""
    changed = reloader.file_changed
    while True:
        await _either(sighup, changed)
        await _quiet(changed, debounce_s, monotonic)
        forced = sighup.is_set()
        sighup.clear()
        try:
            outcome = reloader.reload("signal" if forced else "file", only_if_changed=not forced)
        except Exception:  # a bug of the reload itself: logged, and the next one is tried
            log.exception("tasks.reload_crashed", source="signal" if forced else "file")
            continue
        if outcome is not None and reloader.path is None:
            log.warning("tasks.reload_refused", source="signal", error=outcome.reason)


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


async def _either(first: asyncio.Event, second: asyncio.Event) -> None:
    """Until one of the two events is set."""
    async with asyncio.TaskGroup() as group:
        waits = [group.create_task(first.wait()), group.create_task(second.wait())]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
