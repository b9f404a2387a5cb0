"""Reading the tasks file's bytes: a regular file of at most ``TASKS_FILE_MAX_BYTES``.

Opened with ``O_NONBLOCK`` and checked with ``fstat`` before a byte is read, so that a FIFO, a
device or a huge file put in its place is refused instead of hanging PID 1 or filling its
memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from daemon.schedules.interval import parse_duration

TASKS_FILE_MAX_BYTES = 1 << 20  # 1 MiB: hundreds of times any real tasks file
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class TaskConfigError(ValueError):
    """The tasks file or the default command is wrong. The message names the place; ``key``,
    when known, is the path in the file of the key (or table) it is about, which
    ``runbroker check`` turns into that key's own line."""

    def __init__(self, message: str, key: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key


def read_tasks_file(path: Path) -> bytes:
    """The file's bytes.

    ``FileNotFoundError`` when there is none, ``TaskConfigError`` when it cannot be read or is
    not a regular file of at most ``TASKS_FILE_MAX_BYTES``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise TaskConfigError(f"tasks file {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a file")
            raise TaskConfigError(f"tasks file {path}: not a regular file ({kind})")
        return _bounded_read(fd, path)
    except OSError as exc:
        raise TaskConfigError(f"tasks file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _bounded_read(fd: int, path: Path) -> bytes:
    """At most the bound, whatever ``fstat`` said: the file may grow while it is read."""
    chunks = []
    left = TASKS_FILE_MAX_BYTES + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    if left <= 0:
        raise _too_large(str(path))
    return b"".join(chunks)


def check_size(data: bytes, source: str) -> None:
    """``TaskConfigError`` when ``data`` (a file's bytes read elsewhere: ``reload --dry-run
    --file``) is larger than a tasks file may be."""
    if len(data) > TASKS_FILE_MAX_BYTES:
        raise _too_large(source)


def _too_large(source: str) -> TaskConfigError:
    return TaskConfigError(
        f"tasks file {source}: larger than {TASKS_FILE_MAX_BYTES // 1024} KiB, the most a "
        "tasks file may hold"
    )


def duration_value(place: str, value: Any, *, zero_ok: bool = False) -> float:
    """A duration key's seconds, or a ``TaskConfigError`` that starts with ``place``."""
    if not isinstance(value, str):
        raise TaskConfigError(f"{place} must be a duration string such as '30s'")
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise TaskConfigError(f"{place}: {exc}") from None
    if seconds < 0 and zero_ok:
        raise TaskConfigError(f"{place} must not be negative")
    if seconds <= 0 and not zero_ok:
        raise TaskConfigError(f"{place} must be positive")
    return seconds
