"""The queued rerun requests of an ``Exclusive`` directory: a count kept in a ``SlotFile``.

Every change is one ``SlotFile.mutate``, so concurrent callers never lose each other's changes.
Anything but ASCII digits reads as 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Final

from daemon.coord.slot import SlotFile

__all__ = ["RerunRequests"]

_COUNT_RE: Final = re.compile(rb"[0-9]{1,18}")


def _decode_count(payload: bytes) -> int:
    """The queued-request count. Anything but plain ASCII digits reads as 0."""
    return int(payload) if _COUNT_RE.fullmatch(payload) else 0


class RerunRequests:
    """The count of rerun requests queued at ``path``, shared by every process that opens it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._slot = SlotFile(path)

    def pending(self) -> int:
        """The number of queued requests now (it may change the moment it is read)."""
        return _decode_count(self._slot.read())

    def add(self, capacity: int) -> int:
        """Record one request unless ``capacity`` are queued already, and return the count seen
        before."""
        return self._mutate(lambda n: n + 1 if n < capacity else n)

    def take_one(self) -> int:
        """Take one request to serve, if any, and return the count seen before (0: nothing to
        serve)."""
        return self._mutate(lambda n: n - 1 if n > 0 else 0)

    def clear(self) -> int:
        """Drop every request (a fresh run covers them all), and return the count seen before."""
        return self._mutate(lambda _n: 0)

    def _mutate(self, fn: Callable[[int], int]) -> int:
        def apply(payload: bytes) -> bytes:
            before = _decode_count(payload)
            after = fn(before)
            return payload if after == before else str(after).encode("ascii")

        return _decode_count(self._slot.mutate(apply))
