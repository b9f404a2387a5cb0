"""Watching the tasks file for changes, without polling: inotify on its directory.

A watch on the file itself is lost when the file is replaced (an editor's rename, a ConfigMap's
``..data`` swap), so the directory is watched, and the target's too for a symlink. Every event
that may concern the file calls ``on_change``: the reloader debounces and compares content.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from daemon.broker.reload import inotify
from daemon.log.logs import get_logger

log = get_logger("runbroker.reload")

CONFIGMAP_DATA = "..data"  # the symlink a ConfigMap volume swaps on each update
_ALWAYS = inotify.IN_Q_OVERFLOW | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF


class TasksFileWatcher:
    def __init__(
        self,
        path: Path,
        on_change: Callable[[], None],
        on_state: Callable[[bool], None] | None = None,
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self.on_change = on_change
        self.on_state = on_state  # False while the file's directory is not watched
        self._fd: int | None = None
        self._watches: dict[str, int] = {}  # directory -> watch descriptor
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch from now on, or raise ``inotify.InotifyUnavailable`` (an OSError)."""
        self._fd = inotify.init()
        try:
            self._sync()
        except OSError:
            self.close()
            raise
        self._loop = loop
        loop.add_reader(self._fd, self._readable)

    def close(self) -> None:
        if self._fd is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._loop = None
        os.close(self._fd)  # the kernel drops its watches with it
        self._fd = None
        self._watches.clear()

    def _target(self) -> Path | None:
        try:
            return self.path.resolve(strict=True)
        except (OSError, RuntimeError):  # missing, or a symlink loop
            return None

    def _sync(self) -> None:
        """Add the watches of the file's directory and of its target's again, and remove the others.

        The same inode gives the same descriptor, so a directory swapped for another is seen."""
        assert self._fd is not None
        home = str(self.path.parent)
        target = self._target()
        wanted = {home} | ({str(target.parent)} if target is not None else set())
        old = set(self._watches.values())
        self._watches = {}
        failure: OSError | None = None
        for directory in sorted(wanted):
            try:
                self._watches[directory] = inotify.add_watch(self._fd, directory)
            except OSError as exc:
                if directory == home:
                    failure = exc
        for wd in old - set(self._watches.values()):
            inotify.rm_watch(self._fd, wd)
        if failure is not None:
            raise failure

    def resync(self) -> bool:
        """Add the watches again (SIGHUP, ``runbroker reload``), and return whether the directory is
        watched, as ``on_state`` is told."""
        if self._fd is None:
            return False
        try:
            self._sync()
        except OSError as exc:
            log.warning("reload.watch_lost", directory=str(self.path.parent), error=str(exc))
            self._state(False)
            return False
        self._state(True)
        return True

    def _state(self, watching: bool) -> None:
        if self.on_state is not None:
            self.on_state(watching)

    def _readable(self) -> None:
        assert self._fd is not None
        target = self._target()
        names = {self.path.name, CONFIGMAP_DATA} | ({target.name} if target else set())
        concerned = False
        while True:
            try:
                data = os.read(self._fd, inotify.READ_BYTES)
            except BlockingIOError:
                break
            if not data:
                break
            for wd, mask, name in inotify.events(data):
                if mask & inotify.IN_IGNORED:
                    gone = [d for d, watch in self._watches.items() if watch == wd]
                    for directory in gone:
                        del self._watches[directory]
                    concerned = concerned or bool(gone)
                elif mask & _ALWAYS or name in names:
                    concerned = True
        if not concerned:
            return
        self.resync()
        self.on_change()
