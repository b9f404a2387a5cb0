"""``OverlapGuard``: at most one holder across processes, and ``read_holder`` to see who holds.

The kernel drops a ``flock`` when the holder's last descriptor closes, even when it dies, so
there is no stale-lock state to clean up.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Final

from daemon.coord.files import open_for_read, open_for_update, write_all

__all__ = ["HolderInfo", "OverlapGuard", "read_holder"]

# struct flock for F_OFD_GETLK/F_OFD_SETLK: l_type, l_whence, l_start, l_len, l_pid (native).
_FLOCK_STRUCT: Final = "@hhqqi"
_OFD_SETLK: Final[int | None] = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK: Final[int | None] = getattr(fcntl, "F_OFD_GETLK", None)
_STAMP_MAX_BYTES: Final = 64
_STAMP_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")


def _ofd_lock(fd: int, lock_type: int, command: int) -> int:
    """Run an OFD record-lock command on the whole file, and return the resulting ``l_type``."""
    request = struct.pack(_FLOCK_STRUCT, lock_type, os.SEEK_SET, 0, 0, 0)
    reply = fcntl.fcntl(fd, command, request)
    result: int = struct.unpack(_FLOCK_STRUCT, reply)[0]
    return result


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """What ``read_holder`` saw: ``held`` None when the kernel cannot tell (no OFD locks), and the
    holder's acquisition time and age, None when unknown."""

    held: bool | None
    acquired_at: datetime | None
    held_for_s: float | None


class OverlapGuard:
    """A non-blocking exclusive ``flock`` on ``path``: at most one holder across processes.

    A second descriptor holds a shared open-file-description lock for ``read_holder`` to query,
    so probing never makes a concurrent ``try_acquire`` fail. Close-on-exec, so that a job's
    children do not inherit the lock. Not thread-safe: use one guard per thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._fd: int | None = None
        self._probe_fd: int | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def held(self) -> bool:
        """Whether this guard currently holds the lock."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free, without blocking. ``OSError`` on I/O errors."""
        if self._fd is not None:
            raise RuntimeError(f"{self._path} is already held by this guard")
        fd = open_for_update(self._path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:
            self._probe_fd = self._open_probe()
            # Empty first: a concurrent reader sees nothing or a prefix (unknown), never a mix
            # of the old and the new time.
            os.ftruncate(fd, 0)
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "\n"
            write_all(fd, stamp.encode("ascii"))
        except BaseException:
            self.release()
            raise
        return True

    def _open_probe(self) -> int | None:
        # A separate open file description: on filesystems that emulate flock with record
        # locks (NFS), a read lock on the flock's own description would downgrade it.
        # The probe only feeds read_holder: failing to set it never fails the acquisition.
        if _OFD_SETLK is None:
            return None
        try:
            probe = open_for_read(self._path)
        except OSError:
            return None
        try:
            _ofd_lock(probe, fcntl.F_RDLCK, _OFD_SETLK)
        except OSError:
            os.close(probe)
            return None
        return probe

    def release(self) -> None:
        """Clear the timestamp and close the file, which frees the lock. Idempotent."""
        fd, probe, self._fd, self._probe_fd = self._fd, self._probe_fd, None, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the timestamp is informational: closing still frees the lock
        finally:
            if probe is not None:
                os.close(probe)
            os.close(fd)

    def __enter__(self) -> bool:
        return self.try_acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _parse_stamp(raw: bytes) -> datetime | None:
    if len(raw) > _STAMP_MAX_BYTES or not raw.endswith(b"\n"):
        return None
    try:
        text = raw[:-1].decode("ascii")
    except UnicodeDecodeError:
        return None
    if _STAMP_RE.fullmatch(text) is None:
        return None
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return None


def read_holder(path: str | os.PathLike[str]) -> HolderInfo:
    """Report whether ``path`` is held and since when, without taking or disturbing the lock.

    A missing file reads as not held. A torn, absent or malformed timestamp reads as unknown
    (``acquired_at`` and ``held_for_s`` None). When the kernel says nobody holds the lock, a
    timestamp left by a holder that died is ignored. ``held_for_s`` is wall-clock based and
    never negative.
    """
    try:
        fd = open_for_read(path)
    except FileNotFoundError:
        return HolderInfo(held=False, acquired_at=None, held_for_s=None)
    try:
        held: bool | None = None
        if _OFD_GETLK is not None:
            try:
                held = _ofd_lock(fd, fcntl.F_WRLCK, _OFD_GETLK) != fcntl.F_UNLCK
            except OSError:
                held = None
        if held is False:
            return HolderInfo(held=False, acquired_at=None, held_for_s=None)
        acquired_at = _parse_stamp(os.pread(fd, _STAMP_MAX_BYTES + 1, 0))
    finally:
        os.close(fd)
    if acquired_at is None:
        return HolderInfo(held=held, acquired_at=None, held_for_s=None)
    held_for_s = max(0.0, (datetime.now(UTC) - acquired_at).total_seconds())
    return HolderInfo(held=held, acquired_at=acquired_at, held_for_s=held_for_s)
