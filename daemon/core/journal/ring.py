"""One run's output as the journal keeps it: its lines in order, the newest kept within a bound
in bytes, the older ones dropped and counted.

A line is a record ``(stream, line, at)``: the stream (``stdout``, ``stderr``), the text, and
when it was read (``time.time()``). Every line has a sequence number, 0 for the run's first:
the lines kept are ``first_seq`` to ``end_seq - 1``, and ``first_seq`` is also how many earlier
lines were dropped. A reader (a ``runbroker logs`` client) keeps its own position, so a slow one
holds no copy of anything: what the bound dropped before it got there is counted, not kept.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from daemon.core.runqueue import Run, RunResult

LineRecord = tuple[str, str, float]  # (stream, line, at)
Wake = Callable[[], None]  # a follower: told that a line came or that the run ended

# What a kept line costs besides its text (sys.getsizeof of the str): its record, a 3-tuple
# (64 bytes), its float time (24) and its slot in the list (8). The bound is memory held.
RECORD_BYTES = 96
_COMPACT_AT = 1024  # dropped slots at the list's front before it is compacted
_sizeof = sys.getsizeof
_now = time.time


def line_bytes(line: str) -> int:
    """What one line counts against a bound: its text as Python holds it, and its record."""
    return _sizeof(line) + RECORD_BYTES


class RunLog:
    """The output of one run, bounded at ``bytes_max``: the newest lines are kept."""

    __slots__ = (
        "_head",
        "_lines",
        "bytes",
        "bytes_max",
        "first_seq",
        "followers",
        "result",
        "run_id",
        "started_at",
        "task",
        "trigger",
    )

    def __init__(self, run: Run, bytes_max: int) -> None:
        request = run.request
        self.run_id = run.id
        self.task = request.task
        self.trigger = request.trigger
        self.started_at = _now()
        self.result: RunResult | None = None  # set when the run ends
        self.bytes_max = bytes_max
        self.bytes = 0
        self.first_seq = 0  # the first kept line's number: as many were dropped before it
        self._lines: list[LineRecord] = []
        self._head = 0  # the first kept line's index in _lines
        self.followers: list[Wake] = []

    def add(self, stream: str, line: str) -> None:
        """A line of the run (the hot path: one record appended, nothing else built)."""
        self._lines.append((stream, line, _now()))
        self.bytes += _sizeof(line) + RECORD_BYTES
        if self.bytes > self.bytes_max:
            self._trim()
        if self.followers:
            for wake in self.followers:
                wake()

    def _trim(self) -> None:
        lines, head = self._lines, self._head
        size, bytes_max = self.bytes, self.bytes_max
        while size > bytes_max and head < len(lines):
            size -= _sizeof(lines[head][1]) + RECORD_BYTES
            head += 1
        self.first_seq += head - self._head
        self.bytes = size
        if head >= _COMPACT_AT and head * 2 >= len(lines):
            del lines[:head]
            head = 0
        self._head = head

    @property
    def end_seq(self) -> int:
        """The number the next line will have: how many lines the run has written so far."""
        return self.first_seq + len(self._lines) - self._head

    @property
    def line_count(self) -> int:
        """How many lines are kept."""
        return len(self._lines) - self._head

    def line_at(self, seq: int) -> LineRecord:
        """The kept line numbered ``seq`` (``first_seq <= seq < end_seq``)."""
        if not self.first_seq <= seq < self.end_seq:
            raise IndexError(seq)
        return self._lines[self._head + seq - self.first_seq]

    def lines(self) -> list[LineRecord]:
        """The kept lines, oldest first (a copy)."""
        return self._lines[self._head :]

    def end(self, result: RunResult) -> None:
        """The run has its result: followers are told a last time and let go."""
        self.result = result
        followers, self.followers = self.followers, []
        for wake in followers:
            wake()

    def unfollow(self, wake: Wake) -> None:
        if wake in self.followers:
            self.followers.remove(wake)

    @property
    def finished_at(self) -> float | None:
        result = self.result
        if result is None:
            return None
        return self.started_at + result.duration_ms / 1000
