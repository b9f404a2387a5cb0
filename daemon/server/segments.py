"""A run's lines as ``logs`` readers are sent them, encoded once for all readers that send them.

Followers that keep up send the same lines in the same loop turn, and encoding them once per
follower cost as much as the socket's own copy. The cache holds frames only while two readers
or more are open, within ``bytes_max``.
"""

from __future__ import annotations

SEGMENT_LINES = 1024  # the most lines encoded at once, and the grid a run's lines are cut on
SEGMENT_CACHE_BYTES_MAX = 1024 * 1024  # the run journal's own bound, a run's newest lines

SegmentKey = tuple[str, int, int, bool]  # (run id, first line's number, count, batch)


class SegmentCache:
    """Encoded segments of runs' lines, shared by the ``logs`` readers that send them."""

    __slots__ = ("_frames", "bytes", "bytes_max", "readers")

    def __init__(self, bytes_max: int = SEGMENT_CACHE_BYTES_MAX) -> None:
        self.bytes_max = bytes_max
        self.bytes = 0
        self.readers = 0  # open readers: the cache keeps nothing for fewer than two
        self._frames: dict[SegmentKey, bytes] = {}  # oldest first

    def get(self, key: SegmentKey) -> bytes | None:
        """The encoded segment ``key``, when a reader has asked for it before (``keep``)."""
        return self._frames.get(key)

    def keep(self, key: SegmentKey, data: bytes) -> bytes:
        """``data``, segment ``key`` encoded, kept for the other readers (when there are)."""
        if self.readers > 1 and len(data) <= self.bytes_max:
            frames = self._frames
            frames[key] = data
            self.bytes += len(data)
            while self.bytes > self.bytes_max:
                self.bytes -= len(frames.pop(next(iter(frames))))
        return data

    def opened(self) -> None:
        self.readers += 1

    def closed(self) -> None:
        """A reader has gone: with fewer than two left, nothing is kept."""
        self.readers -= 1
        if self.readers < 2 and self._frames:
            self._frames.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._frames)
