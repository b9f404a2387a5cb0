"""Linux inotify through ctypes: the three calls of libc and the event records they produce.

The descriptor is non-blocking and read by the event loop, so there is no thread and no
polling.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from typing import Any

IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000  # the watch is gone (its directory was deleted, or it was removed)
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# Everything that can replace or rewrite a file in a directory: an editor's write, a rename
# over it (an atomic replace), a ConfigMap's ``..data`` symlink swapped by a rename.
DIRECTORY_CHANGES = (
    IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of NUL-padded name)
READ_BYTES = 64 * 1024


class InotifyUnavailable(OSError):
    """inotify cannot be used here, and the message says why."""


_libc: Any = None


def _functions() -> Any:
    global _libc
    if _libc is None:
        try:
            # The process's own symbols, libc's among them: ``find_library`` would run
            # ldconfig, a process started at every start.
            libc = ctypes.CDLL(None, use_errno=True)
            for name in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"):
                getattr(libc, name)
        except (OSError, AttributeError) as exc:
            raise InotifyUnavailable(f"no inotify in libc: {exc}") from None
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc = libc
    return _libc


def _failed(what: str) -> InotifyUnavailable:
    errno = ctypes.get_errno()
    return InotifyUnavailable(errno, f"{what}: {os.strerror(errno)}")


def init() -> int:
    """A new non-blocking, close-on-exec inotify descriptor."""
    fd = int(_functions().inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        raise _failed("inotify_init1")
    return fd


def add_watch(fd: int, path: str, mask: int = DIRECTORY_CHANGES) -> int:
    """Watch ``path`` (a directory, with the default mask), and return the watch descriptor."""
    wd = int(_functions().inotify_add_watch(fd, os.fsencode(path), mask))
    if wd < 0:
        raise _failed(f"inotify_add_watch {path}")
    return wd


def rm_watch(fd: int, wd: int) -> None:
    _functions().inotify_rm_watch(fd, wd)  # a watch already gone is not an error here


def events(data: bytes) -> Iterator[tuple[int, int, str]]:
    """(wd, mask, name) of each event record in ``data`` (name empty for the directory)."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        name = data[start : start + length].split(b"\0", 1)[0]
        yield wd, mask, os.fsdecode(name)
        offset = start + length
