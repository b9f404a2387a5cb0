"""The state directory: each ticking task's last planned slot (and which tasks' last run
failed), kept across restarts.

Without it a restart forgets the schedule's past, and a slot planned while the container was
being replaced is neither run nor reported. The file (``state_file``) is replaced atomically (a
temporary file, fsync, rename, fsync of the directory), so a crash leaves the old state or the
new, never a mix. The directory is locked for the daemon's life: two daemons on one directory
would both catch up. Writes that fail (a full disk) are one incident: logged when the first
fails and when one works again, shown by ``status``, ``health`` and the metrics meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from daemon.coord.guard import OverlapGuard
from daemon.core.rfc3339 import rfc3339_utc_at
from daemon.log.logs import get_logger
from daemon.wire.control_shapes import StateDirStatus

log = get_logger("runbroker.state")

STATE_FILE = "slots.json"
LOCK_FILE = "runbroker.lock"
SET_ASIDE_SUFFIX = ".refused"  # a file that is not ours is renamed, never overwritten
WRITE_RETRY_S = 5.0  # after a failed write, tried again this often even with nothing new

_Snapshot = tuple[dict[str, float], frozenset[str]]


class StateDirRefused(Exception):
    """The state directory cannot be used; ``str(err)`` is one line saying why."""


@dataclass
class LoadedState:
    """What the state file held at start-up, and why it was set aside if it was."""

    last_planned: dict[str, float] = field(default_factory=dict)  # task: Unix seconds
    failing: set[str] = field(default_factory=set)  # tasks whose last run failed
    problem: str = ""  # empty, or why the file was refused (and renamed aside)


class SlotState:
    """The state directory: ``open`` it once, tell it each planned slot, ``close`` at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE
        self.last_planned: dict[str, float] = {}
        self.failing: set[str] = set()
        self._guard = OverlapGuard(directory / LOCK_FILE)
        self._dirty = asyncio.Event()
        self._written: _Snapshot = ({}, frozenset())
        self.write_failures = 0  # since start
        self.failing_since: float | None = None  # Unix time of this incident's first failure
        self.last_error = ""

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
        # Imported here: the file's pydantic models are built only when a state directory is set.
        from daemon.core.ticker.state_file import (
            SavedState,
            StateFileRefused,
            parse_state,
            read_regular,
        )

        loaded = LoadedState()
        try:
            data = read_regular(self.path)
            saved = SavedState() if data is None else parse_state(data)
            loaded.last_planned, loaded.failing = saved.last_planned, saved.failing
        except StateFileRefused as exc:
            loaded.problem = self._set_aside(str(exc))
        self.last_planned = dict(loaded.last_planned)
        self.failing = set(loaded.failing)
        self._written = self._snapshot()
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

    def rewind(self, task: str, planned_at: float) -> None:
        """``task``'s last planned slot is ``planned_at``, though one later was kept (a time
        past now, from a clock that was ahead)."""
        if self.last_planned.get(task) != planned_at:
            self.last_planned[task] = planned_at
            self._dirty.set()

    def forget(self, keep: set[str]) -> None:
        """Only the tasks in ``keep`` are still scheduled: the others' slots go."""
        for task in [task for task in self.last_planned if task not in keep]:
            del self.last_planned[task]
            self._dirty.set()

    def ended(self, task: str, failed: bool) -> None:
        """``task``'s last run failed, or not: what a restart tells a ``recovery`` by."""
        if failed != (task in self.failing):
            if failed:
                self.failing.add(task)
            else:
                self.failing.discard(task)
            self._dirty.set()

    def _snapshot(self) -> _Snapshot:
        return dict(self.last_planned), frozenset(self.failing)

    async def keep_written(self) -> None:
        """Write the state whenever it changed, off the loop, until cancelled; after a failed
        write, again every ``WRITE_RETRY_S`` until one works."""
        while True:
            if self.failing_since is None:
                await self._dirty.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._dirty.wait(), WRITE_RETRY_S)
            self._dirty.clear()
            await asyncio.to_thread(self._write, self._snapshot())

    def write(self) -> bool:
        """Replace the file with what is known now; False (counted, logged) when it failed."""
        return self._write(self._snapshot())

    def _write(self, snapshot: _Snapshot) -> bool:
        if snapshot == self._written and self.failing_since is None:
            return True
        from daemon.core.ticker.state_file import SavedState, encode_state  # ``open`` imported it

        data = encode_state(SavedState(snapshot[0], set(snapshot[1])))
        try:
            self._replace(data)
        except OSError as exc:
            self._failed(exc.strerror or type(exc).__name__)
            return False
        self._written = snapshot
        if self.failing_since is not None:
            failing_for_s = round(time.time() - self.failing_since, 3)
            self.failing_since = None
            log.info("state.write_restored", path=str(self.path), failing_for_s=failing_for_s)
        return True

    def _replace(self, data: bytes) -> None:
        temporary = self.path.with_name(STATE_FILE + ".tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
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

    def _failed(self, error: str) -> None:
        """One more failed write; the first of an incident is logged, the others counted."""
        self.write_failures += 1
        self.last_error = error
        if self.failing_since is None:
            self.failing_since = time.time()
            log.error("state.write_failed", path=str(self.path), error=error)

    def status(self) -> StateDirStatus:
        since = self.failing_since
        return {
            "dir": str(self.directory),
            "write_failures": self.write_failures,
            "failing_since": None if since is None else rfc3339_utc_at(since),
            "error": self.last_error if since is not None else None,
        }

    def health_warnings(self) -> list[str]:
        if self.failing_since is None:
            return []
        return [
            f"state directory {self.directory}: writes failing since "
            f"{rfc3339_utc_at(self.failing_since)} ({self.last_error}); the slots planned since are"
            " not kept for the next start"
        ]

    def close(self) -> None:
        """Write what is left and unlock the directory."""
        self.write()
        self._guard.release()
