"""The last planned slot of each ticking task, kept in the state directory across restarts.

Without it a restart forgets the schedule's past, and a slot planned while the container was
being replaced is neither run nor reported. The file is replaced atomically (a temporary file,
fsync, rename, fsync of the directory), so a crash leaves the old state or the new, never a mix.
The directory is locked for the daemon's life: two daemons on one directory would both catch up.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.coord.guard import OverlapGuard
from daemon.log.logs import get_logger

log = get_logger("runbroker.state")

STATE_FILE = "slots.json"
LOCK_FILE = "runbroker.lock"
SET_ASIDE_SUFFIX = ".refused"  # a file that is not ours is renamed, never overwritten
FORMAT = "runbroker.slots"
VERSION = 1
STATE_BYTES_MAX = 4 * 1024 * 1024  # a larger file is not one this daemon wrote
TASK_NAME_CHARS_MAX = 200


class StateDirRefused(Exception):
    """The state directory cannot be used; ``str(err)`` is one line saying why."""


@dataclass
class LoadedState:
    """What the state file held at start-up, and why it was set aside if it was."""

    last_planned: dict[str, float] = field(default_factory=dict)  # task: Unix seconds
    problem: str = ""  # empty, or why the file was refused (and renamed aside)


def _task_entries(document: Any) -> dict[str, float]:
    """The file's tasks, or ValueError naming what is wrong with its shape."""
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("format") != FORMAT:
        raise ValueError(f"its format is not {FORMAT!r}")
    if document.get("version") != VERSION:
        raise ValueError(f"version {document.get('version')!r}, this daemon reads {VERSION}")
    tasks = document.get("tasks")
    if not isinstance(tasks, dict):
        raise ValueError("'tasks' is not an object")
    entries: dict[str, float] = {}
    for name, entry in tasks.items():
        planned = entry.get("last_planned") if isinstance(entry, dict) else None
        if (
            not isinstance(planned, int | float)
            or isinstance(planned, bool)
            or not math.isfinite(planned)
            or len(name) > TASK_NAME_CHARS_MAX
        ):
            raise ValueError("a task's entry is not a name and a finite 'last_planned'")
        entries[name] = float(planned)
    return entries


def _read_regular(path: Path) -> bytes | None:
    """The file's bytes; None when absent. A FIFO, a device or a symlink is refused unopened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise ValueError(f"cannot be opened as a plain file ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > STATE_BYTES_MAX:
            raise ValueError(f"larger than {STATE_BYTES_MAX} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(STATE_BYTES_MAX + 1)
    finally:
        os.close(fd)


class SlotState:
    """The state directory: ``open`` it once, tell it each planned slot, ``close`` at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE
        self.last_planned: dict[str, float] = {}
        self._guard = OverlapGuard(directory / LOCK_FILE)
        self._dirty = asyncio.Event()
        self._written: dict[str, float] = {}
        self.write_failures = 0

    def open(self) -> LoadedState:
        """Lock the directory and read its state; ``StateDirRefused`` when it cannot be used."""
        directory = self.directory
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not directory.is_dir():
                raise StateDirRefused(f"RUNBROKER_STATE_DIR: {directory} is not a directory")
            if not self._guard.try_acquire():
                raise StateDirRefused(
                    f"RUNBROKER_STATE_DIR: {directory} is in use by another runbroker daemon"
                )
        except OSError as exc:
            raise StateDirRefused(
                f"RUNBROKER_STATE_DIR: {directory} cannot be used ({exc.strerror})"
            ) from exc
        loaded = LoadedState()
        try:
            data = _read_regular(self.path)
            if data is not None:
                if len(data) > STATE_BYTES_MAX:
                    raise ValueError(f"larger than {STATE_BYTES_MAX} bytes")
                loaded.last_planned = _task_entries(json.loads(data))
        except (ValueError, UnicodeDecodeError) as exc:
            loaded.problem = self._set_aside(str(exc))
        self.last_planned = dict(loaded.last_planned)
        self._written = dict(loaded.last_planned)
        return loaded

    def _set_aside(self, why: str) -> str:
        """Rename a file that is not ours out of the way, so that it is kept, not overwritten."""
        aside = self.path.with_name(STATE_FILE + SET_ASIDE_SUFFIX)
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            return f"{self.path} refused ({why}) and not set aside ({exc.strerror})"
        return f"{self.path} refused ({why}); kept as {aside.name}; no catch-up this start"

    def planned(self, task: str, planned_at: float) -> None:
        """``task``'s slot at ``planned_at`` was planned: the newest one is what is kept."""
        if planned_at > self.last_planned.get(task, -math.inf):
            self.last_planned[task] = planned_at
            self._dirty.set()

    def forget(self, keep: set[str]) -> None:
        """Only the tasks in ``keep`` are still scheduled: the others' slots go."""
        for task in [task for task in self.last_planned if task not in keep]:
            del self.last_planned[task]
            self._dirty.set()

    async def keep_written(self) -> None:
        """Write the state whenever it changed, off the loop, until cancelled."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.to_thread(self._write, dict(self.last_planned))

    def write(self) -> bool:
        """Replace the file with what is known now; False (counted, logged) when it failed."""
        return self._write(dict(self.last_planned))

    def _write(self, snapshot: dict[str, float]) -> bool:
        if snapshot == self._written:
            return True
        document = {
            "format": FORMAT,
            "version": VERSION,
            "tasks": {task: {"last_planned": at} for task, at in sorted(snapshot.items())},
        }
        data = json.dumps(document, indent=1).encode() + b"\n"
        temporary = self.path.with_name(STATE_FILE + ".tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(temporary, flags, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
            directory_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory_fd)
            finally:
                os.close(directory_fd)
        except OSError as exc:
            self.write_failures += 1
            log.error("state.write_failed", path=str(self.path), error=exc.strerror)
            return False
        self._written = snapshot
        return True

    def close(self) -> None:
        """Write what is left and unlock the directory."""
        self.write()
        self._guard.release()
