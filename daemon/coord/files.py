"""How the coordination files are opened, read and written: one rule for all of them.

Mode 0600, close-on-exec (a job's children do not inherit a lock) and no symlink followed at the
last component. A file is rewritten in place, because a lock on a replaced inode protects
nothing.
"""

from __future__ import annotations

import os
from typing import Final

_OPEN_FLAGS: Final = os.O_CLOEXEC | os.O_NOFOLLOW
_FILE_MODE: Final = 0o600


def open_for_update(path: str | os.PathLike[str]) -> int:
    """A read-write descriptor on ``path``, creating the file (0600) if absent."""
    return os.open(path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, _FILE_MODE)


def open_for_read(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on ``path``, or ``FileNotFoundError`` when it is absent."""
    return os.open(path, os.O_RDONLY | _OPEN_FLAGS)


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` at offset 0 (retrying short writes) and cut the file to its length."""
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    os.ftruncate(fd, len(data))


def read_all(fd: int) -> bytes:
    """The whole file from offset 0, whatever the descriptor's position."""
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
