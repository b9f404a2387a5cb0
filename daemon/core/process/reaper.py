"""The PID-1 orphan reaper: zombies that are not the daemon's own to wait for.

It waits only for zombies the supervisor has not recorded, by pid, because a ``waitpid(-1)``
reaper makes uvloop hang (FIELD-NOTES). A zombie of the daemon's own session waits
``UNCLAIMED_ZOMBIE_S`` first, long after the event loop would have collected its own child.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from daemon.log.logs import get_logger

log = get_logger("runbroker.process")

UNCLAIMED_ZOMBIE_S = 2.0  # a zombie of our own session nobody collected in this time is reaped


class OrphanReaper:
    """Reaps the zombie children whose pids are not in ``owned`` (the supervisor's set of the
    children it waits for itself)."""

    def __init__(self, owned: set[int], clock: Callable[[], float]) -> None:
        self._owned = owned
        self._clock = clock
        self._unclaimed: dict[int, float] = {}  # zombie of our session -> first seen
        self._look_again = False  # an owned zombie hid the others: look once it is collected
        self.wake: Callable[[], None] | None = None  # asks for a reap soon (SIGCHLD's reaper)

    def collected(self) -> None:
        """The supervisor has collected one of its own children."""
        if self._look_again:
            self._look_again = False
            if self.wake is not None:
                self.wake()

    def reap(self) -> list[int]:
        """Wait for zombie children that are not ours, and return the pids reaped."""
        first = _first_zombie_child()
        if first is None:
            self._unclaimed.clear()
            return []  # the common case, without scanning /proc
        if first in self._owned:
            # Most SIGCHLDs are a job's own exit, about to be collected: the scan waits for
            # that, when the look is asked for again.
            self._look_again = True
            return []
        reaped = []
        own_session = os.getsid(0)
        now = self._clock()
        unclaimed: dict[int, float] = {}
        for pid, session in zombie_children_with_session(os.getpid()):
            if pid in self._owned:
                continue
            if session == own_session:
                # Perhaps a child the event loop or a handler is about to collect: only one
                # that nobody claims for a while is an orphan.
                first_seen = self._unclaimed.get(pid, now)
                if now - first_seen < UNCLAIMED_ZOMBIE_S:
                    unclaimed[pid] = first_seen
                    continue
            try:
                done_pid, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done_pid == pid:
                reaped.append(pid)
        self._unclaimed = unclaimed
        if reaped:
            log.debug("reaper.reaped", count=len(reaped))
        return reaped


def _first_zombie_child() -> int | None:
    """Peek, without reaping, at a child of ours that has exited: its pid (None: none has)."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    return None if info is None else info.si_pid


def _children_of(parent_pid: int) -> list[str] | None:
    """The pids of ``parent_pid``'s children, from its threads' ``children`` files.

    A handful of reads instead of one per process on the machine. None where the kernel has no
    such file."""
    pids: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{parent_pid}/task")
        for task in tasks:
            with open(f"/proc/{parent_pid}/task/{task}/children", "rb") as children:
                pids.extend(children.read().decode().split())
    except FileNotFoundError:
        return None
    except OSError:
        return []
    return pids


def zombie_children_with_session(parent_pid: int) -> list[tuple[int, int]]:
    """(pid, session) of the zombie processes whose parent is ``parent_pid``, from /proc."""
    found: list[tuple[int, int]] = []
    candidates = _children_of(parent_pid)
    if candidates is None:
        try:
            candidates = [entry for entry in os.listdir("/proc") if entry.isdigit()]
        except OSError:
            return found
    for entry in candidates:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, session, ...
        tail = stat[stat.rfind(b")") + 2 :].split()
        if len(tail) < 4 or tail[0] != b"Z" or int(tail[1]) != parent_pid:
            continue
        found.append((int(entry), int(tail[3])))
    return found


def zombie_children(parent_pid: int, exclude_session: int | None = None) -> list[int]:
    """Pids of zombie processes whose parent is ``parent_pid`` (outside ``exclude_session``)."""
    return [
        pid
        for pid, session in zombie_children_with_session(parent_pid)
        if exclude_session is None or session != exclude_session
    ]
