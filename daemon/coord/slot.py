"""``SlotFile``: one byte payload shared across processes.

Framed with a length and a CRC-32, so that bytes torn by a crash read back as empty.
"""

from __future__ import annotations

import fcntl
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from daemon.coord.files import open_for_read, open_for_update, read_all, write_all

__all__ = ["SlotFile"]

_SLOT_MAGIC: Final = b"RBSLOT1 "
_SLOT_HEADER_RE: Final = re.compile(rb"RBSLOT1 ([0-9a-f]{8}) ([0-9a-f]{8})\n")
_SLOT_HEADER_BYTES: Final = len(_SLOT_MAGIC) + 8 + 1 + 8 + 1


def _encode_slot(payload: bytes) -> bytes:
    return b"%s%08x %08x\n%s" % (_SLOT_MAGIC, len(payload), zlib.crc32(payload), payload)


def _decode_slot(raw: bytes) -> bytes:
    """The framed payload, or b"" for an empty, torn or foreign file."""
    header = _SLOT_HEADER_RE.fullmatch(raw[:_SLOT_HEADER_BYTES])
    if header is None:
        return b""
    length, crc = int(header[1], 16), int(header[2], 16)
    payload = raw[_SLOT_HEADER_BYTES : _SLOT_HEADER_BYTES + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        return b""
    return payload


class SlotFile:
    """A single byte payload shared across processes, stored at ``path``, changed under a lock.

    Rewritten in place, never replaced, because a lock on a replaced inode protects nothing.
    Not fsynced: it coordinates live processes and promises nothing across a power loss."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        return self._path

    def read(self) -> bytes:
        """The current payload: b"" when the file is absent, empty or torn."""
        try:
            fd = open_for_read(self._path)
        except FileNotFoundError:
            return b""
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return _decode_slot(read_all(fd))
        finally:
            os.close(fd)

    def mutate(self, fn: Callable[[bytes], bytes]) -> bytes:
        """Replace the payload with ``fn(current)`` atomically, and return what ``fn`` saw.

        Nothing is written when ``fn`` returns what it was given or raises."""
        fd = open_for_update(self._path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = _decode_slot(read_all(fd))
            new = fn(current)
            if not isinstance(new, bytes):
                raise TypeError(f"mutate fn must return bytes, not {type(new).__name__}")
            if new != current:
                write_all(fd, _encode_slot(new))
            return current
        finally:
            os.close(fd)
