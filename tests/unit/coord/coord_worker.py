"""Worker process for the coord tests (conftest.py starts it): one real process per contender.

Usage: ``python coord_worker.py MODE ARGS...``. Modes that race print ``ready`` and act on
``go`` lines from stdin, so the test releases every contender at the same moment; results go
to stdout as JSON lines.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from daemon.coord.exclusive import Exclusive
from daemon.coord.guard import OverlapGuard
from daemon.coord.slot import SlotFile
from daemon.log.logs import configure_logging


def _wait_for_go() -> None:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("expected go")


def _hammer(directory: Path, capacity: int) -> None:
    """One Exclusive.run per ``go`` line; the job checks that no other run overlaps it.

    After each call, prints one JSON line: when the call started, its outcome and runs, when
    each of its runs started (CLOCK_MONOTONIC is system-wide) and any overlap it saw.
    """
    marker = directory / "running.marker"
    inner_lock = directory / "inner.lock"
    run_starts_ns: list[int] = []
    overlaps: list[str] = []

    def job() -> bool:
        run_starts_ns.append(time.monotonic_ns())
        try:
            marker_fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            overlaps.append("marker")
            return False
        inner_fd = os.open(inner_lock, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            try:
                fcntl.flock(inner_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno != errno.EWOULDBLOCK:
                    raise
                overlaps.append("flock")
        finally:
            os.close(inner_fd)
            os.close(marker_fd)
            os.unlink(marker)
        return True

    exclusive = Exclusive(directory, queue_capacity=capacity)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        run_starts_ns.clear()
        overlaps.clear()
        called_at_ns = time.monotonic_ns()
        result = exclusive.run(job)
        report = {
            "called_at_ns": called_at_ns,
            "outcome": result.outcome.value,
            "runs": result.runs,
            "run_starts_ns": run_starts_ns,
            "overlaps": overlaps,
        }
        print(json.dumps(report), flush=True)


def _count(slot_path: Path, increments: int) -> None:
    slot = SlotFile(slot_path)

    def increment(raw: bytes) -> bytes:
        value = int(raw or b"0")
        os.sched_yield()  # invite a rival between our read and our write
        return str(value + 1).encode()

    _wait_for_go()
    seen: list[int] = []
    for _ in range(increments):
        seen.append(int(slot.mutate(increment) or b"0"))
    print(json.dumps(seen), flush=True)


def _hold_guard(lock_path: Path) -> None:
    guard = OverlapGuard(lock_path)
    if not guard.try_acquire():
        raise SystemExit("lock busy")
    print("acquired", flush=True)
    sys.stdin.readline()  # hold until killed (or stdin closes)


def _hold_exclusive(directory: Path) -> None:
    def job() -> bool:
        print("running", flush=True)
        sys.stdin.readline()  # run until killed (or stdin closes)
        return True

    Exclusive(directory).run(job)


def _queue(directory: Path) -> None:
    result = Exclusive(directory).run(lambda: True)
    print(result.outcome.value, flush=True)


def main(argv: list[str]) -> None:
    configure_logging("json", "warning", stream=sys.stderr)  # stdout is the test's
    mode, *args = argv
    if mode == "hammer":
        _hammer(Path(args[0]), int(args[1]))
    elif mode == "count":
        _count(Path(args[0]), int(args[1]))
    elif mode == "hold-guard":
        _hold_guard(Path(args[0]))
    elif mode == "hold-exclusive":
        _hold_exclusive(Path(args[0]))
    elif mode == "queue":
        _queue(Path(args[0]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
